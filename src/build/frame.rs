//! One frame of the build's terminal progress display ([`super::progress`]), fitted to the
//! terminal's width. Pure layout: no I/O, no clock.
//!
//! The frame is one line, `    Building [00:08:40] =====>     265/393 about 12m left`, and a second
//! line `running: linking librccl.so.1.0 (device link, mostly single-threaded), 4m12s` whenever the
//! running step is known. What gives way when the width is short, in this order: the bar (30
//! columns, then fewer, then none), the estimate's explanation (`no timing record for this recipe
//! yet: elapsed time only` becomes `no timing record`), the estimate, and only then the running
//! step's own explanation (its parenthesis) and its tail. `running: <step>` itself starts the
//! second line at any width, so a 60-column terminal still shows what runs.

use std::time::Duration;

/// The bar's width when there is room for it (columns).
pub const BAR_WIDTH: usize = 30;

/// A bar narrower than this (columns) is left out.
pub const BAR_MIN: usize = 10;

/// What one frame shows.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Time since the build's ninja run started.
    pub elapsed: Duration,
    /// ninja's finished and total edge counts (`[265/393]`).
    pub pos: u64,
    /// See `pos`.
    pub len: u64,
    /// The estimate, or why there is none (`about 12m left (steps run at 1.30x the recorded
    /// time)`, `no timing record for this recipe yet: elapsed time only`).
    pub eta: &'a str,
    /// The running step and for how long it has run, when the build graph or the record tells.
    pub running: Option<(&'a str, Duration)>,
    /// The step ninja reported last, shown (after the estimate) only when the running step is not
    /// known.
    pub last: &'a str,
}

/// Render `f` for a terminal `width` columns wide: one or two lines (joined by `\n`, no trailing
/// newline), none longer than `width - 1` columns (counted in `char`s; the last column stays free
/// so that no terminal wraps early). `color`: the status verb in bold green, as
/// [`crate::ui::Ui::status`] writes it.
pub fn render(f: &Frame, width: usize, color: bool) -> String {
    let cols = width.saturating_sub(1).max(20);
    let head = format!("{:>12} [{}] ", "Building", hms(f.elapsed));
    let counter = format!("{}/{}", f.pos, f.len);
    let fixed = head.chars().count() + counter.chars().count();
    let room = cols.saturating_sub(fixed);

    // The estimate's forms, most complete first; without a running step the last finished step
    // follows it.
    let short = shorten(f.eta);
    let mut msgs: Vec<String> = vec![];
    if f.running.is_some() || f.last.is_empty() {
        msgs.extend([f.eta.to_owned(), short.to_owned()]);
    } else {
        msgs.extend([
            format!("{} | {}", f.eta, f.last),
            format!("{short} | {}", f.last),
            f.last.to_owned(),
        ]);
    }
    let msg = msgs
        .iter()
        .find(|m| m.chars().count() < room)
        .cloned()
        .unwrap_or_else(|| {
            truncate(
                msgs.last().map_or("", String::as_str),
                room.saturating_sub(1),
            )
        });
    let msg_cols = if msg.is_empty() {
        0
    } else {
        msg.chars().count() + 1
    };
    let left = room.saturating_sub(msg_cols);
    let bar = if left > BAR_MIN {
        let w = (left - 1).min(BAR_WIDTH);
        format!("{} ", bar(f.pos, f.len, w))
    } else {
        String::new()
    };
    let verb = if color {
        format!("\x1b[1;32m{head}\x1b[0m")
    } else {
        head
    };
    let mut out = format!("{verb}{bar}{counter}");
    if !msg.is_empty() {
        out.push(' ');
        out.push_str(&msg);
    }
    if let Some((what, secs)) = f.running {
        out.push('\n');
        out.push_str(&running_line(what, secs, cols));
    }
    out
}

/// `running: <what>, 4m12s`, fitted to `cols`: the whole, else `<what>` without its
/// parenthesis, else cut with `…` (keeping `running: ` and as much of the step as fits).
pub fn running_line(what: &str, secs: Duration, cols: usize) -> String {
    let t = mins_secs(secs);
    for w in [what, shorten(what)] {
        let line = format!("running: {w}, {t}");
        if line.chars().count() <= cols {
            return line;
        }
    }
    truncate(&format!("running: {}, {t}", shorten(what)), cols)
}

/// The text before its explanation: before the first ` (` or `: `, whichever comes first
/// (`no timing record for this recipe yet: elapsed time only` → `no timing record for this recipe
/// yet`; `about 12m left (steps run …)` → `about 12m left`).
fn shorten(text: &str) -> &str {
    let cut = [" (", ": ", "; "]
        .iter()
        .filter_map(|p| text.find(p))
        .min()
        .unwrap_or(text.len());
    text[..cut].trim_end()
}

/// `text` cut to at most `cols` chars, ending in `…` when cut.
fn truncate(text: &str, cols: usize) -> String {
    if text.chars().count() <= cols {
        return text.to_owned();
    }
    if cols == 0 {
        return String::new();
    }
    let mut s: String = text.chars().take(cols - 1).collect();
    s.push('…');
    s
}

/// `=====>    ` for `pos` of `len`, `width` columns.
fn bar(pos: u64, len: u64, width: usize) -> String {
    let filled = if len == 0 {
        0
    } else {
        ((pos.min(len) as f64 / len as f64) * width as f64) as usize
    };
    if filled >= width {
        return "=".repeat(width);
    }
    format!("{}>{}", "=".repeat(filled), " ".repeat(width - filled - 1))
}

/// `00:08:40` (hours, minutes, seconds).
fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `4m12s`, `40s`, `1h05m`.
fn mins_secs(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: &str = "linking librccl.so.1.0 (device link, mostly single-threaded)";
    const NO_RECORD: &str = "no timing record for this recipe yet: elapsed time only";

    fn frame<'a>(eta: &'a str, running: Option<&'a str>, last: &'a str) -> Frame<'a> {
        Frame {
            elapsed: Duration::from_secs(520),
            pos: 391,
            len: 393,
            eta,
            running: running.map(|r| (r, Duration::from_secs(252))),
            last,
        }
    }

    fn widest(s: &str) -> usize {
        s.lines().map(|l| l.chars().count()).max().unwrap()
    }

    /// At every width from 60 columns up, the running step starts the second line, and no line
    /// is wider than the terminal.
    #[test]
    fn the_running_step_shows_at_every_width() {
        for width in 60..=200 {
            let s = render(&frame(NO_RECORD, Some(LINK), "x"), width, false);
            assert!(widest(&s) < width, "{width}: {s}");
            let second = s.lines().nth(1).unwrap();
            assert!(
                second.starts_with("running: linking librccl.so.1.0"),
                "{width}: {s}"
            );
            assert!(second.ends_with(", 4m12s"), "{width}: {s}");
        }
    }

    #[test]
    fn at_80_and_120_columns_the_bar_and_the_explanation_give_way_first() {
        let s = render(&frame(NO_RECORD, Some(LINK), "x"), 80, false);
        assert_eq!(
            s,
            "    Building [00:08:40] =========> 391/393 no timing record for this recipe yet\n\
             running: linking librccl.so.1.0 (device link, mostly single-threaded), 4m12s"
        );
        let s = render(&frame(NO_RECORD, Some(LINK), "x"), 120, false);
        assert_eq!(
            s,
            "    Building [00:08:40] =============================> 391/393 no timing record for this recipe yet: elapsed time only\n\
             running: linking librccl.so.1.0 (device link, mostly single-threaded), 4m12s"
        );
        // At 60 the parenthesis goes; the step stays.
        let s = render(&frame(NO_RECORD, Some(LINK), "x"), 60, false);
        assert_eq!(
            s.lines().nth(1).unwrap(),
            "running: linking librccl.so.1.0, 4m12s"
        );
    }

    #[test]
    fn without_a_running_step_the_last_finished_follows_the_estimate() {
        let s = render(
            &frame(
                "about 12m left (steps run at 1.30x the recorded time)",
                None,
                "Building CXX object a.o",
            ),
            100,
            false,
        );
        assert_eq!(s.lines().count(), 1, "{s}");
        assert!(
            s.ends_with("about 12m left | Building CXX object a.o"),
            "{s}"
        );
        for width in 40..=200 {
            let s = render(
                &frame(NO_RECORD, None, "Building CXX object a.o"),
                width,
                false,
            );
            assert!(widest(&s) < width, "{width}: {s}");
        }
    }

    #[test]
    fn colour_touches_only_the_verb() {
        let s = render(&frame(NO_RECORD, Some(LINK), ""), 80, true);
        assert!(
            s.starts_with("\x1b[1;32m    Building [00:08:40] \x1b[0m"),
            "{s:?}"
        );
        assert_eq!(s.matches('\x1b').count(), 2, "{s:?}");
    }

    #[test]
    fn small_parts() {
        assert_eq!(bar(0, 0, 5), ">    ");
        assert_eq!(bar(5, 10, 10), "=====>    ");
        assert_eq!(bar(10, 10, 4), "====");
        assert_eq!(mins_secs(Duration::from_secs(4000)), "1h06m");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(shorten("about 3m left"), "about 3m left");
    }
}
