//! The Containerfile parser (Dockerfile syntax) for the official-image toolchains
//! (`containers/rocm-<release>/Containerfile`): comments, parser directives, backslash
//! continuations, `ARG` defaults in `FROM`. `rcclfix matrix --check` uses it to tie a recipe's
//! image to its Containerfile.
//!
//! Source: the Dockerfile reference (docs.docker.com/reference/dockerfile).

use anyhow::{bail, Context};

/// and refused).
pub const KNOWN_INSTRUCTIONS: &[&str] = &[
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
];

/// Expand `${NAME}` and `$NAME` in a `FROM` argument with the defaults of the `ARG`s declared before
/// it (Dockerfile reference: "Understand how ARG and FROM interact").
fn expand_args(s: &str, args: &[(String, String)]) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let (name, len) = if let Some(b) = after.strip_prefix('{') {
            let end = b.find('}').context("unterminated ${")?;
            (&b[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        let value = args
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
            .with_context(|| format!("${name} has no default ARG before FROM"))?;
        out.push_str(value);
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A parsed Containerfile: the image of the first `FROM` and every instruction with its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Containerfile {
    /// The image reference of the first `FROM` (without `--platform=…` and `AS name`), with the
    /// defaults of earlier `ARG`s substituted.
    pub from: String,
    /// (instruction upper-case, arguments with continuations joined, 1-based first line).
    pub instructions: Vec<(String, String, usize)>,
}

/// Parse a Containerfile (Dockerfile syntax): comments, parser directives and backslash
/// continuations; only `ARG` may precede the first `FROM`; every instruction must be known and have
/// arguments.
///
/// Errors: one line naming `origin` and the line number.
pub fn parse_containerfile(text: &str, origin: &str) -> anyhow::Result<Containerfile> {
    let mut instructions = Vec::new();
    let mut cur: Option<(String, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let t = raw.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_none()) {
            continue;
        }
        let (acc, start) = cur.take().unwrap_or_else(|| (String::new(), n));
        let (body, cont) = match t.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (t, false),
        };
        let joined = if acc.is_empty() {
            body.to_owned()
        } else {
            format!("{acc} {body}")
        };
        if cont {
            cur = Some((joined, start));
        } else {
            instructions.push((joined, start));
        }
    }
    if let Some((_, start)) = cur {
        bail!("{origin}: line {start}: the file ends inside a continued instruction");
    }
    let mut out = Vec::new();
    let mut from = None;
    let mut global_args: Vec<(String, String)> = Vec::new();
    for (line, n) in instructions {
        let (word, args) = line
            .split_once(char::is_whitespace)
            .unwrap_or((line.as_str(), ""));
        let word = word.to_ascii_uppercase();
        let args = args.trim().to_owned();
        if !KNOWN_INSTRUCTIONS.contains(&word.as_str()) {
            bail!("{origin}: line {n}: unknown instruction {word:?}");
        }
        if args.is_empty() {
            bail!("{origin}: line {n}: {word} has no arguments");
        }
        if from.is_none() {
            match word.as_str() {
                "FROM" => {
                    let img = args
                        .split_whitespace()
                        .find(|a| !a.starts_with("--"))
                        .unwrap_or_default();
                    let img = expand_args(img, &global_args)
                        .with_context(|| format!("{origin}: line {n}: FROM {img}"))?;
                    from = Some(img);
                }
                "ARG" => {
                    let (name, default) = args.split_once('=').unwrap_or((args.as_str(), ""));
                    let default = default.trim().trim_matches('"').to_owned();
                    global_args.push((name.trim().to_owned(), default));
                }
                _ => bail!(
                    "{origin}: line {n}: {word} before the first FROM (only ARG may precede it)"
                ),
            }
        }
        out.push((word, args, n));
    }
    let from = from.with_context(|| format!("{origin}: no FROM instruction"))?;
    Ok(Containerfile {
        from,
        instructions: out,
    })
}
