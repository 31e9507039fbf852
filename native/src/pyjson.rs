//! JSON text exactly as Python's `json.dumps(value)` writes it (default separators, ensure_ascii),
//! so the engine can write the document itself instead of building a million Python objects.
//!
//! Metrics held as JSON text are streamed from that text into Python's spelling: objects with a
//! Python dict's semantics (a duplicate key keeps its first place and takes its last value),
//! floats as `repr(float)`, strings escaped to ASCII, ints as written.
//! tests/unit/test_native_json.py checks this against `json.dumps(msgspec.json.decode(text))`.

use serde_json::value::RawValue;

use crate::decode::Text;
use crate::score::object_members;
use std::fmt::Write;

/// A string literal as json.dumps writes it (ensure_ascii=True, lower-case hex).
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
        }
    }
    out.push('"');
}

/// `repr(x)` for a finite float: the shortest digits that round-trip (Ryu, which like Python
/// breaks a tie between two shortest spellings to the even digit), in fixed notation when the
/// decimal point falls within -4 < decpt <= 16, else as d.ddde±XX.
pub fn write_float(out: &mut String, x: f64) {
    let mut buffer = ryu::Buffer::new();
    let mut digits = [0u8; 24]; // a double has at most 17 significant digits
    let (n, decpt) = digits_of(buffer.format_finite(x.abs()), &mut digits);
    let digits = std::str::from_utf8(&digits[..n]).expect("ASCII digits");
    let (n, decpt) = (n as i32, decpt);
    if x.is_sign_negative() {
        out.push('-');
    }
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push_str(if e < 0 { "e-" } else { "e+" });
        let e = e.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        let _ = write!(out, "{e}");
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(digits);
    } else if decpt >= n {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
}

/// The significant digits of a formatted non-negative number ("12.5", "1e-7", "1.25E16"),
/// written into `digits`, their count, and the position of the decimal point relative to
/// them (value = 0.DIGITS x 10^decpt); zero is "0" at 1.
fn digits_of(text: &str, digits: &mut [u8; 24]) -> (usize, i32) {
    let bytes = text.as_bytes();
    let (mantissa, exp) = match bytes.iter().position(|b| *b == b'e' || *b == b'E') {
        Some(at) => (&bytes[..at], text[at + 1..].parse::<i32>().unwrap_or(0)),
        None => (bytes, 0),
    };
    let point = mantissa.iter().position(|b| *b == b'.').unwrap_or(mantissa.len());
    let (mut n, mut decpt, mut leading) = (0usize, point as i32 + exp, true);
    for &b in mantissa.iter().filter(|b| b.is_ascii_digit()) {
        if leading && b == b'0' {
            decpt -= 1; // a leading zero moves the point
            continue;
        }
        leading = false;
        if n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    while n > 0 && digits[n - 1] == b'0' {
        n -= 1;
    }
    if n == 0 {
        digits[0] = b'0';
        return (1, 1);
    }
    (n, decpt)
}

/// The metrics text (validated by the decoder) in json.dumps spelling; None if it cannot be
/// read here (then Python writes it). Streamed from the text: no value tree is built.
pub fn write_metrics(out: &mut String, text: &str) -> Option<()> {
    write_raw(out, text.trim())
}

fn write_raw(out: &mut String, text: &str) -> Option<()> {
    match text.as_bytes().first()? {
        b'{' => write_object(out, text)?,
        b'[' => {
            let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_raw(out, item.get())?;
            }
            out.push(']');
        }
        b'"' => {
            let Text(s) = serde_json::from_str(text).ok()?;
            write_str(out, &s);
        }
        b't' | b'f' | b'n' => out.push_str(text), // true, false, null
        _ if text.contains(['.', 'e', 'E']) => {
            let x: f64 = text.parse().ok()?;
            if !x.is_finite() {
                return None;
            }
            write_float(out, x);
        }
        _ if text == "-0" => out.push('0'), // an int: Python's 0 (the decoder refuses it anyway)
        _ => out.push_str(text),             // an int, spelled as Python spells it
    }
    Some(())
}

/// An object as a Python dict writes it: a duplicate name keeps its first place and its last value.
fn write_object(out: &mut String, text: &str) -> Option<()> {
    let members = object_members(text)?;
    let duplicated = members.len() > 1 && (1..members.len()).any(|i| members[..i].iter().any(|m| m.0 .0 == members[i].0 .0));
    out.push('{');
    if duplicated {
        let mut merged: indexmap::IndexMap<&str, &RawValue> = indexmap::IndexMap::new();
        for (Text(name), value) in &members {
            merged.insert(name, value);
        }
        write_members(out, merged.into_iter())?;
    } else {
        write_members(out, members.iter().map(|(Text(name), value)| (&**name, *value)))?;
    }
    out.push('}');
    Some(())
}

fn write_members<'a>(out: &mut String, members: impl Iterator<Item = (&'a str, &'a RawValue)>) -> Option<()> {
    for (i, (name, value)) in members.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(out, name);
        out.push_str(": ");
        write_raw(out, value.get())?;
    }
    Some(())
}
