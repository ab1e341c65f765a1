//! Escaping untrusted text for a terminal: [`escape`] (and [`Esc`], [`escape_path`],
//! [`escape_message`]) turns every file name, archive member name, log line and text from a child
//! process into text that cannot move the cursor, retitle the window, clear the screen or start a
//! new line. `ui` re-exports it (`crate::ui::escape`); `process` uses it for a failed command's
//! output without depending on `ui`, so the two do not import one another.

use std::borrow::Cow;
use std::fmt::{self, Display, Write as _};
use std::path::Path;

/// Escape an untrusted string for a terminal: the result holds no C0 control character (newline,
/// tab and carriage return included), no DEL, no C1 control (U+0080–U+009F, e.g. the one-byte CSI
/// U+009B) and no Unicode bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069, which
/// can make a terminal show text in another order than it is). They become `\n`, `\r`, `\t`,
/// `\e` (ESC) or `\xNN` / `\u{NNNN}`; everything else, a backslash included, is kept as it is.
/// Borrowed when nothing needs escaping.
///
/// Use it for every file name, archive member name, log line and error text that came from
/// outside rcclfix. `--json` output must not use it (the JSON encoder escapes exactly).
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// [`escape`] for a path (not UTF-8 bytes become U+FFFD first, as `Path::display` does).
pub fn escape_path(p: &Path) -> String {
    escape(&p.to_string_lossy()).into_owned()
}

/// [`escape`] for a message rcclfix composed: like [`escape`], except that a newline directly
/// followed by `help: ` or `note: ` (the hint lines of the style guide) is kept, so hints still
/// stand on their own line. Any other newline, one inside a file name included, is shown as `\n`.
///
/// A file name that itself holds `"\nhelp: "` therefore shows as a line starting with `help:`;
/// its text is still escaped, so it cannot hide or rewrite other output.
pub fn escape_message(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some((i, c)) = rest.char_indices().next() {
        debug_assert_eq!(i, 0);
        let after = &rest[c.len_utf8()..];
        if c == '\n' && (after.starts_with("help: ") || after.starts_with("note: ")) {
            out.push('\n');
        } else {
            push_escaped(&mut out, c);
        }
        rest = after;
    }
    Cow::Owned(out)
}

/// A [`Display`] wrapper that escapes what the inner value displays ([`escape`]):
/// `ui::status("Scanning", ui::Esc(path.display()))`.
#[derive(Debug, Clone, Copy)]
pub struct Esc<T>(pub T);

impl<T: Display> Display for Esc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.to_string();
        f.write_str(&escape(&s))
    }
}

/// Whether `c` is shown escaped by [`escape`]: control characters (C0, DEL, C1), the bidi
/// embedding, override and isolate characters, and the Unicode line and paragraph separators
/// (U+2028, U+2029), which some terminals and log viewers break lines at.
pub fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL and C1 (Unicode category Cc)
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

fn push_escaped(out: &mut String, c: char) {
    if !needs_escape(c) {
        out.push(c);
        return;
    }
    let _ = match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\x1b' => out.write_str("\\e"),
        c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{{{:04x}}}", c as u32),
    };
}
