//! Progress on stderr: a single rewritten line on a terminal, one plain line
//! per item otherwise (logs, CI).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    terminal: bool,
    last_draw: Option<Instant>,
}

impl Progress {
    pub fn new(total: usize) -> Self {
        Progress {
            total,
            done: 0,
            start: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            last_draw: None,
        }
    }

    /// One item finished: `id` with a short `status`.
    pub fn item_done(&mut self, id: &str, status: &str) {
        self.done += 1;
        let elapsed = self.start.elapsed();
        let eta = if self.done > 0 {
            elapsed.mul_f64((self.total - self.done) as f64 / self.done as f64)
        } else {
            Duration::ZERO
        };
        let mut err = std::io::stderr().lock();
        if self.terminal {
            // Redrawing a line per file costs nothing noticeable, but a
            // terminal flooded at thousands of lines a second is slow.
            let now = Instant::now();
            let due = self
                .last_draw
                .is_none_or(|t| now - t >= Duration::from_millis(100));
            if !due && self.done < self.total {
                return;
            }
            self.last_draw = Some(now);
            let width = 40;
            let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
            let _ = write!(
                err,
                "\r[{}{}] {}/{} {:.0}s eta {:.0}s {} {}\x1b[K",
                "#".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total,
                elapsed.as_secs_f64(),
                eta.as_secs_f64(),
                shorten(id, 40),
                status
            );
            if self.done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(
                err,
                "[{}/{}] {:.0}s eta {:.0}s {id} {status}",
                self.done,
                self.total,
                elapsed.as_secs_f64(),
                eta.as_secs_f64()
            );
        }
        let _ = err.flush();
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(max - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}
