//! What `bash` keeps of a command's output: a bounded head and tail for the result, and the
//! latest line as rate-limited progress.
//!
//! Why apart: pure bookkeeping over bytes, with no process or signal in it; tested on its own.

use super::{ms, PROGRESS_INTERVAL_MS, PROGRESS_LINE_CHARS_MAX};
use crate::tool::ProgressSink;
use std::collections::VecDeque;
use tokio::time::Instant;

/// Head and tail of the output, with the count of everything.
#[derive(Debug)]
pub(super) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    /// Bytes printed in all.
    pub(super) total: u64,
}

impl Capture {
    /// Keeps at most `max` bytes: the first half and the last half.
    pub(super) fn new(max: usize) -> Capture {
        let head_max = max / 2;
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max: max - head_max,
            total: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = self
            .head_max
            .saturating_sub(self.head.len())
            .min(bytes.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        let rest = &bytes[to_head..];
        if rest.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_max..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_max);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
    }

    /// Bytes printed but not kept.
    pub(super) fn omitted(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// The kept output as text, with a marker line where bytes were cut.
    pub(super) fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let omitted = self.omitted();
        if omitted == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Cut at character boundaries where the cut split one.
        let head = match std::str::from_utf8(&self.head) {
            Ok(_) => &self.head[..],
            Err(e) if e.error_len().is_none() => &self.head[..e.valid_up_to()],
            Err(_) => &self.head[..],
        };
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        let tail = &tail[skip..];
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[... {omitted} bytes of output cut here: {} in all, the first {} and the last {} \
             are shown ...]\n",
            self.total,
            head.len(),
            tail.len()
        ));
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }
}

/// Rate-limited progress: the latest line of output, at most every [`PROGRESS_INTERVAL_MS`].
pub(super) struct Progress {
    sink: ProgressSink,
    last_report: Option<Instant>,
    line: Option<String>,
}

impl Progress {
    pub(super) fn new(sink: ProgressSink) -> Progress {
        Progress {
            sink,
            last_report: None,
            line: None,
        }
    }

    /// Notes a chunk of output; reports its last line when a report is due.
    pub(super) fn saw(&mut self, chunk: &[u8]) {
        if let Some(line) = chunk
            .split(|b| *b == b'\n')
            .rev()
            .map(|l| String::from_utf8_lossy(l).trim().to_owned())
            .find(|l| !l.is_empty())
        {
            self.line = Some(line.chars().take(PROGRESS_LINE_CHARS_MAX).collect());
        }
        let due = self
            .last_report
            .is_none_or(|at| at.elapsed() >= ms(PROGRESS_INTERVAL_MS));
        if due {
            if let Some(line) = self.line.take() {
                // Progress is advisory: a full queue or a finished call just drops it.
                let _ = self.sink.report(line);
                self.last_report = Some(Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(16);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.omitted(), 0);
        assert_eq!(c.render(), "hello world");
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_marks_the_cut() {
        let mut c = Capture::new(10);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qrstuvwxyz"] {
            c.push(chunk);
        }
        assert_eq!(c.total, 26);
        assert_eq!(c.omitted(), 16);
        let text = c.render();
        assert!(text.starts_with("abcde\n[... 16 bytes"), "{text}");
        assert!(text.ends_with("...]\nvwxyz"), "{text}");
    }

    #[test]
    fn a_cut_inside_a_character_drops_the_broken_pieces() {
        // a (1 byte), é (2), € (3), € (3): the head's 4 bytes end inside the first €, the
        // tail's 4 start inside it.
        let mut c = Capture::new(8);
        c.push("aé€€".as_bytes());
        let text = c.render();
        assert!(!text.contains('\u{fffd}'), "{text:?}");
        assert!(text.starts_with("aé\n[... 1 bytes"), "{text:?}");
        assert!(text.ends_with("...]\n€"), "{text:?}");
    }
}
