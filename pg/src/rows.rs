//! Reading a journal's rows back in seq order, a page at a time.
//!
//! Why keyset pages (`seq > last ORDER BY seq LIMIT n`) and not one query: a journal can hold
//! millions of rows and the reader's memory is bounded by a page, not by the journal; and a
//! page is one short statement, so a reader holds no transaction open against a live writer.

use crate::conn::Conn;
use crate::writer::meta_of;
use crate::Target;
use journal::{JournalError, JournalMeta, Row, RowSource};
use std::collections::VecDeque;
use std::sync::Arc;

/// Rows per page.
pub(crate) const PAGE_ROWS: i64 = 1024;

/// A journal's rows in seq order (see [`journal::RecordStore::rows`]).
pub struct PgRows {
    target: Arc<Target>,
    conn: Conn,
    /// The last seq handed out (0 before the first).
    last_seq: i64,
    page: VecDeque<Row>,
    /// A short page was read: no more rows.
    done: bool,
}

impl std::fmt::Debug for PgRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRows")
            .field("location", &self.target.location())
            .field("last_seq", &self.last_seq)
            .finish_non_exhaustive()
    }
}

/// A journal's identity and a source of its rows.
type Opened = (JournalMeta, Box<dyn RowSource>);

/// The journal's identity and a source of its rows; `None` without a journal.
pub(crate) fn open(target: &Arc<Target>) -> Result<Option<Opened>, JournalError> {
    let conn = target.connect("connect")?;
    let session = target.session.clone();
    let found = conn
        .call(move |w| {
            let rows = w.client.query(
                "SELECT journal_id, format_version FROM tooljournal_sessions WHERE session = $1",
                &[&session],
            )?;
            match rows.first() {
                None => Ok(None),
                Some(row) => {
                    let id: Option<Vec<u8>> = row.try_get(0)?;
                    let version: Option<i32> = row.try_get(1)?;
                    Ok(id.map(|id| (id, version.unwrap_or(0))))
                }
            }
        })
        .map_err(|e| e.into_store(target.location(), "read"))?;
    let Some((id, version)) = found else {
        return Ok(None);
    };
    let meta = meta_of(target.location(), &id, version)?;
    let rows = PgRows {
        target: target.clone(),
        conn,
        last_seq: 0,
        page: VecDeque::new(),
        done: false,
    };
    Ok(Some((meta, Box::new(rows))))
}

impl PgRows {
    fn fetch_page(&mut self) -> Result<(), JournalError> {
        let session = self.target.session.clone();
        let after = self.last_seq;
        let raw: Vec<(i64, i64, Vec<u8>)> = self
            .conn
            .call(move |w| {
                let page = w.prepared(
                    "SELECT seq, crc, payload FROM tooljournal_records
                      WHERE session = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                )?;
                let rows = w.client.query(&page, &[&session, &after, &PAGE_ROWS])?;
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .collect()
            })
            .map_err(|e| e.into_store(self.target.location(), "read"))?;
        self.done = (raw.len() as i64) < PAGE_ROWS;
        for (seq, crc, payload) in raw {
            // The table's CHECKs keep both in range; a row outside is reported, not wrapped.
            let (Ok(seq_u), Ok(crc_u)) = (u64::try_from(seq), u32::try_from(crc)) else {
                return Err(JournalError::Store {
                    location: self.target.location().to_string(),
                    op: "read",
                    message: format!("row seq {seq} crc {crc} is out of range"),
                });
            };
            self.page.push_back(Row {
                seq: seq_u,
                crc: crc_u,
                payload,
            });
        }
        Ok(())
    }
}

impl RowSource for PgRows {
    fn next_row(&mut self) -> Result<Option<Row>, JournalError> {
        if self.page.is_empty() && !self.done {
            self.fetch_page()?;
        }
        let row = self.page.pop_front();
        if let Some(row) = &row {
            self.last_seq = row.seq as i64;
        }
        Ok(row)
    }
}
