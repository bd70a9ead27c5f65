//! What `run` and `resume` show people while a session runs: on a terminal, a live line per
//! running tool (its latest progress), replaced by its verdict; elsewhere, one line per call.
//!
//! Why a verdict waits: observers hear of a result when its `committed` record is appended,
//! before any sync. A line that said `ok` then could be a lie after a power loss (the journal
//! would show the call started and nothing more). So a verdict is shown only once the journal
//! is durable past the moment it was committed: at the next sync the printer sees (the next
//! call's start, which follows the write-ahead sync) or when the session closes.

use journal::Journal;
use runtime::event::CallRef;
use runtime::Observer;
use runtime::ToolResult;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A verdict waiting for the journal to be durable through `seq`.
struct Pending {
    seq: u64,
    call: CallRef,
    line: String,
}

pub struct Printer {
    live: Option<indicatif::MultiProgress>,
    lines: Mutex<HashMap<CallRef, indicatif::ProgressBar>>,
    /// Set once the session is open (the printer is made before it, as one of its observers).
    journal: OnceLock<Arc<Journal>>,
    pending: Mutex<Vec<Pending>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while printing leaves nothing half-updated that matters here.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Printer {
    pub fn new() -> Printer {
        use std::io::IsTerminal;
        Printer {
            live: std::io::stdout()
                .is_terminal()
                .then(indicatif::MultiProgress::new),
            lines: Default::default(),
            journal: OnceLock::new(),
            pending: Default::default(),
        }
    }

    /// The session's journal, whose durable point decides when a verdict may be shown.
    pub fn watch(&self, journal: Arc<Journal>) {
        let _ = self.journal.set(journal);
    }

    /// Shows every verdict the journal is now durable for. After the session closed (its last
    /// sync), that is all of them.
    pub fn show_durable(&self) {
        let Some(journal) = self.journal.get() else {
            return;
        };
        let durable = journal.stats().durable_seq;
        let ready: Vec<Pending> = {
            let mut pending = lock(&self.pending);
            let (ready, waiting) = pending.drain(..).partition(|p| p.seq <= durable);
            *pending = waiting;
            ready
        };
        for p in ready {
            self.show(&p.call, p.line);
        }
    }

    fn show(&self, call: &CallRef, line: String) {
        let bar = lock(&self.lines).remove(call);
        match (&self.live, bar) {
            (Some(live), Some(bar)) => {
                // The verdict becomes a plain line above the live ones: once none is left,
                // nothing of the bars stays under what is printed next (the model's text).
                bar.finish_and_clear();
                live.remove(&bar);
                let _ = live.println(line);
            }
            (Some(live), None) => {
                let _ = live.println(line);
            }
            (None, _) => {
                let _ = crate::out(format_args!("{line}"));
            }
        }
    }

    fn label(call: &CallRef, tool: &str) -> String {
        format!(
            "  turn {} step {}  {:<12} {:<8}",
            call.turn,
            call.step,
            runtime::display::visible(&call.call_id),
            tool
        )
    }
}

impl Observer for Printer {
    fn name(&self) -> &str {
        "printer"
    }
    fn on_start(&self, call: &CallRef, tool: &str) -> Result<(), String> {
        // A start follows the write-ahead sync: earlier verdicts may be durable now.
        self.show_durable();
        if let Some(live) = &self.live {
            let bar = live.add(indicatif::ProgressBar::new_spinner());
            bar.set_prefix(Printer::label(call, tool));
            bar.set_style(
                indicatif::ProgressStyle::with_template("{prefix} {spinner} {elapsed} {wide_msg}")
                    .map_err(|e| e.to_string())?,
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            lock(&self.lines).insert(call.clone(), bar);
        }
        Ok(())
    }
    fn on_progress(&self, call: &CallRef, _tool: &str, message: &str) -> Result<(), String> {
        if let Some(bar) = lock(&self.lines).get(call) {
            bar.set_message(runtime::display::one_line(message, 200));
        }
        Ok(())
    }
    fn on_result(&self, call: &CallRef, tool: &str, result: &ToolResult) -> Result<(), String> {
        let verdict = match result.code {
            None => "ok".to_owned(),
            Some(code) => code.as_str().to_owned(),
        };
        let line = format!("{} {verdict}", Printer::label(call, tool));
        // Everything appended so far includes this call's records.
        let seq = self
            .journal
            .get()
            .map(|j| j.stats().appended_seq)
            .unwrap_or(u64::MAX);
        if let Some(bar) = lock(&self.lines).get(call) {
            bar.set_message("settled; waiting for the journal to be durable");
        }
        lock(&self.pending).push(Pending {
            seq,
            call: call.clone(),
            line,
        });
        self.show_durable();
        Ok(())
    }
}
