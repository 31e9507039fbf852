//! JSON text exactly as Python's `json.dumps(value)` writes it (default separators, ensure_ascii),
//! so the engine can write the document itself instead of building a million Python objects.
//!
//! Metrics held as JSON text are re-read (serde_json keeps a Python dict's semantics with
//! `preserve_order`: a duplicate key keeps its first place and takes its last value) and
//! written in Python's spelling: floats as `repr(float)`, strings escaped to ASCII.
//! tests/unit/test_native_json.py checks this against `json.dumps(msgspec.json.decode(text))`.

use serde_json::Value;
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
    let (digits, decpt) = digits_of(buffer.format_finite(x.abs()));
    if x.is_sign_negative() {
        out.push('-');
    }
    let n = digits.len() as i32;
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if decpt >= n {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
}

/// The significant digits of a formatted non-negative number ("12.5", "1e-7", "1.25E16") and
/// the position of the decimal point relative to them (value = 0.DIGITS x 10^decpt); zero is ("0", 1).
fn digits_of(text: &str) -> (String, i32) {
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = whole.chars().chain(fraction.chars()).collect();
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return ("0".to_owned(), 1);
    }
    (digits.to_owned(), whole.len() as i32 - leading as i32 + exp)
}

fn write_value(out: &mut String, v: &Value) -> Option<()> {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                let x = n.as_f64()?;
                if !x.is_finite() {
                    return None;
                }
                write_float(out, x);
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (name, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, name);
                out.push_str(": ");
                write_value(out, item)?;
            }
            out.push('}');
        }
    }
    Some(())
}

/// The metrics text (validated by the decoder) in json.dumps spelling; None if it cannot be read.
pub fn write_metrics(out: &mut String, text: &str) -> Option<()> {
    let value: Value = serde_json::from_str(text).ok()?;
    write_value(out, &value)
}
