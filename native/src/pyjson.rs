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
