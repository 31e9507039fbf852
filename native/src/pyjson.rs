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

/// `repr(x)` for a finite float: the shortest digits that round-trip, in fixed notation when
/// the decimal point falls within -4 < decpt <= 16, else as d.ddde±XX.
pub fn write_float(out: &mut String, x: f64) {
    let sci = format!("{x:e}"); // shortest round-trip digits: "-1.25e-7", "0e0"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if digits.len() >= 16 {
        if let Some(even) = tie_to_even(x.abs(), &digits) {
            digits = even;
        }
    }
    let decpt = exp + 1;
    out.push_str(sign);
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if decpt as usize >= digits.len() {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', decpt as usize - digits.len()));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
}

/// Python's repr breaks a tie between two shortest spellings to the even last digit; Rust's
/// shortest formatting takes the upper one. A tie needs 16+ digits (two decimals of that
/// length within one ulp), and then the exact expansion ends in the digit 5 right after them.
fn tie_to_even(x: f64, digits: &str) -> Option<String> {
    let n = digits.len();
    if digits.as_bytes()[n - 1].is_multiple_of(2) {
        return None; // already even (the tie, if any, went the Python way)
    }
    let probe = format!("{:.*e}", n + 1, x); // n + 2 significant digits, rounded
    let next: String = probe.split('e').next()?.chars().filter(char::is_ascii_digit).skip(n).collect();
    if !matches!(next.as_str(), "49" | "50" | "51") {
        return None;
    }
    let exact = format!("{:.*e}", 1100, x); // every digit of a double (at most 767 significant)
    let all: String = exact.split('e').next()?.chars().filter(char::is_ascii_digit).collect();
    let (head, rest) = all.split_at(n);
    if !rest.starts_with('5') || rest[1..].bytes().any(|b| b != b'0') {
        return None;
    }
    // a tie between `head` and `head + 1`: Python keeps the even one of the two
    let candidate = if head.as_bytes()[n - 1].is_multiple_of(2) { head.to_owned() } else { increment(head)? };
    let exp = exact.split('e').nth(1)?;
    let respelled = format!("{}.{}e{}", &candidate[..1], &candidate[1..], exp);
    (respelled.parse::<f64>().ok()? == x).then_some(candidate)
}

/// The decimal digit string plus one in its last place; None when that carries into a new digit.
fn increment(digits: &str) -> Option<String> {
    let mut bytes = digits.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'9' {
            *b = b'0';
        } else {
            *b += 1;
            return String::from_utf8(bytes).ok();
        }
    }
    None
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
