//! CloudEvents `time` the native decoder vouches for: a strict subset of what Python's
//! `datetime.fromisoformat` (events/models.py `check_time`) accepts —
//! `YYYY-MM-DDTHH:MM:SS[.fff|.ffffff](Z|±HH:MM)` with every field in range. Anything else
//! goes to the Python decoder, which accepts it or says why not.

fn number(s: &[u8]) -> Option<u32> {
    s.iter().try_fold(0u32, |n, b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub fn time_ok(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return false;
    }
    let field = |from: usize, to: usize| number(&b[from..to]);
    let (Some(year), Some(month), Some(day)) = (field(0, 4), field(5, 7), field(8, 10)) else { return false };
    let (Some(hour), Some(minute), Some(second)) = (field(11, 13), field(14, 16), field(17, 19)) else { return false };
    if year == 0 || !(1..=12).contains(&month) || day == 0 || day > days_in(year, month) || hour > 23 || minute > 59
        || second > 59 {
        return false;
    }
    let mut rest = &b[19..];
    if rest.first() == Some(&b'.') {
        let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits != 3 && digits != 6 {
            return false;
        }
        rest = &rest[1 + digits..];
    }
    match rest {
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            matches!((number(&[*h1, *h2]), number(&[*m1, *m2])), (Some(h), Some(m)) if h <= 23 && m <= 59)
        }
        _ => false,
    }
}
