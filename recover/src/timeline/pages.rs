//! The calls' pages, within the size bound.
//!
//! Why pages: a 1 GiB journal holds more calls than a browser should lay out at once, so the
//! items go in blocks of [`PAGE_ITEMS`] items that the page's script parses only when shown.
//! Why a bound: the file must open at all. Items are written as they come until half the
//! items' budget is spent; later ones go to a ring holding the other half, whose oldest items
//! are dropped (and counted) as new ones come. So the file shows the session's beginning and
//! its end — where a crash is — and says exactly what it left out between them.

use super::page::{page_open, Counted, PAGE_CLOSE};
use std::collections::VecDeque;
use std::io::Write;

/// Items (calls, steps, turns) per page.
pub(super) const PAGE_ITEMS: usize = 120;

/// One item of the pages: its JSON text (escaped for a script block) and what it is.
#[derive(Debug)]
pub(super) struct Item {
    pub(super) text: String,
    pub(super) kind: ItemKind,
    /// The turn it belongs to.
    pub(super) turn: u32,
}

/// What an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ItemKind {
    /// A call.
    Call,
    /// A step (its span and outcome); calls of a step follow it.
    Step,
    /// A turn (the user's words).
    Turn,
}

/// What was left out between the beginning and the end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Elided {
    pub(super) calls: u64,
    pub(super) steps: u64,
    pub(super) turns: Option<(u32, u32)>,
}

impl Elided {
    fn count(&mut self, item: &Item) {
        match item.kind {
            ItemKind::Call => self.calls += 1,
            ItemKind::Step => self.steps += 1,
            ItemKind::Turn => {}
        }
        self.turns = Some(match self.turns {
            None => (item.turn, item.turn),
            Some((first, _)) => (first, item.turn),
        });
    }

    /// Nothing was left out.
    pub(super) fn is_empty(&self) -> bool {
        self.calls == 0 && self.steps == 0
    }
}

/// The pages, written as items come (see the module documentation).
#[derive(Debug)]
pub(super) struct Pages {
    /// Bytes the items of the beginning may take; the ring of the end takes as many.
    half_bytes_max: u64,
    head_bytes: u64,
    /// Items now go to the ring.
    in_tail: bool,
    tail: VecDeque<Item>,
    tail_bytes: u64,
    /// The page being written: its items so far (`None`: no page is open).
    open_page_items: Option<usize>,
    /// The last step item written or dropped: a page that begins inside a step repeats it.
    last_step: Option<String>,
    pages: u64,
    pub(super) elided: Elided,
}

impl Pages {
    /// Pages whose items take at most `items_bytes_max` bytes.
    pub(super) fn new(items_bytes_max: u64) -> Pages {
        Pages {
            half_bytes_max: items_bytes_max / 2,
            head_bytes: 0,
            in_tail: false,
            tail: VecDeque::new(),
            tail_bytes: 0,
            open_page_items: None,
            last_step: None,
            pages: 0,
            elided: Elided::default(),
        }
    }

    /// Pages written so far (all of them once [`Pages::finish`] returned).
    pub(super) fn count(&self) -> u64 {
        self.pages
    }

    /// Takes one item: written now, or kept in the ring of the end.
    pub(super) fn push<W: Write>(
        &mut self,
        out: &mut Counted<W>,
        item: Item,
    ) -> std::io::Result<()> {
        let bytes = item_bytes(&item);
        if !self.in_tail && self.head_bytes + bytes <= self.half_bytes_max {
            self.head_bytes += bytes;
            return self.write(out, item, false);
        }
        self.in_tail = true;
        self.tail_bytes += bytes;
        self.tail.push_back(item);
        while self.tail_bytes > self.half_bytes_max {
            let Some(dropped) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= item_bytes(&dropped);
            self.elided.count(&dropped);
            if dropped.kind == ItemKind::Step {
                self.last_step = Some(dropped.text);
            }
        }
        Ok(())
    }

    /// Writes the ring, after the gap if there is one, and closes the last page.
    pub(super) fn finish<W: Write>(&mut self, out: &mut Counted<W>) -> std::io::Result<()> {
        let gap = !self.elided.is_empty();
        if gap {
            self.close_page(out)?;
        }
        let mut first = gap;
        while let Some(item) = self.tail.pop_front() {
            self.write(out, item, first)?;
            first = false;
        }
        self.close_page(out)
    }

    fn write<W: Write>(
        &mut self,
        out: &mut Counted<W>,
        item: Item,
        gap: bool,
    ) -> std::io::Result<()> {
        if self.open_page_items.is_some_and(|n| n >= PAGE_ITEMS) {
            self.close_page(out)?;
        }
        let fresh = self.open_page_items.is_none();
        if fresh {
            out.put(page_open(gap))?;
            self.pages += 1;
            self.open_page_items = Some(0);
            // A page that begins inside a step repeats the step first.
            if item.kind == ItemKind::Call {
                if let Some(step) = &self.last_step {
                    out.put(step)?;
                    out.put(",")?;
                }
            }
        } else {
            out.put(",")?;
        }
        out.put(&item.text)?;
        self.open_page_items = self.open_page_items.map(|n| n + 1);
        if item.kind == ItemKind::Step {
            self.last_step = Some(item.text);
        }
        Ok(())
    }

    fn close_page<W: Write>(&mut self, out: &mut Counted<W>) -> std::io::Result<()> {
        if self.open_page_items.take().is_some() {
            out.put(PAGE_CLOSE)?;
        }
        Ok(())
    }
}

/// The most bytes a step item takes (its texts are cut to keep it so).
pub(super) const STEP_ITEM_BYTES_MAX: u64 = 8192;

/// What a page adds besides its items: its markup, and a repeat of its step at its head.
pub(super) const PAGE_OVERHEAD_BYTES: u64 = 128 + STEP_ITEM_BYTES_MAX;

/// Pages whose overhead the writer reserves apart from the items': the last of the
/// beginning, the first after the gap, and the last.
pub(super) const PAGES_UNCHARGED: u64 = 3;

/// What an item may cost once written: its text, its comma, and its share of its page's
/// overhead (a page closes only once it holds [`PAGE_ITEMS`] items, so pages number at most
/// the items over [`PAGE_ITEMS`] plus [`PAGES_UNCHARGED`]).
fn item_bytes(item: &Item) -> u64 {
    item.text.len() as u64 + 1 + PAGE_OVERHEAD_BYTES.div_ceil(PAGE_ITEMS as u64)
}
