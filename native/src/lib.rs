//! ckptlog_native: the engine of `ckptlog fold` compiled, driven by processor/native.py.
//!
//! It reads the file itself and folds each line as processor/foldfile.py `fold_lines` does;
//! lines its fast path refuses, and the rare rules, are answered by Python (support.rs).
//! Where it cannot be sure to match the Python fold it raises `Unsupported`, and the caller
//! folds the file in Python instead. tests/unit/test_native_fold.py checks the two agree.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};

mod decode;
mod fold;
mod kept;
mod pyjson;
mod rfc3339;
mod route;
mod score;
mod support;
mod view;
mod window;

use fold::{Config, Fold, Outcome};
use route::{Shards, AMBIGUOUS};
use support::Support;

create_exception!(ckptlog_native, Unsupported, PyException, "The file needs the Python fold.");

const PROGRESS_MASK: u64 = 65_535; // report progress every 64k lines
const SIGNAL_MASK: u64 = 4_095; // let Python handle signals every 4k lines (~10 ms)

#[pyclass(unsendable)]
struct NativeFold {
    fold: Fold,
    support: Support,
    max_bytes: usize,
    fast: bool,
    shards: Option<Shards>,
    lineno: u64,
    rejected: Vec<(u64, String, String)>,
    first_line: FxHashMap<Box<str>, u64>,
    applied: u64,
    duplicates: u64,
}

#[pymethods]
impl NativeFold {
    /// `defaults`: (num_to_keep, score attribute, order is max, default root, its prefix, dedup window).
    /// `shard`: (mine, count, planned {run id bytes: shard}) or None.
    #[new]
    #[pyo3(signature = (support, defaults, max_bytes, fast, shard=None))]
    fn new(support: Py<PyAny>, defaults: (Option<usize>, Option<String>, bool, Option<String>, String, usize),
           max_bytes: usize, fast: bool, shard: Option<(i64, i64, FxHashMap<Vec<u8>, i64>)>) -> Self {
        let (keep, attr, order_max, root, prefix, window) = defaults;
        let config = Config { keep, attr, order_max, root: root.map(Into::into), prefix: prefix.into() };
        NativeFold {
            fold: Fold::new(config, window), support: Support::new(support), max_bytes, fast,
            shards: shard.map(|(mine, count, planned)| Shards::new(mine, count, planned)),
            lineno: 0, rejected: Vec::new(), first_line: FxHashMap::default(), applied: 0, duplicates: 0,
        }
    }

    /// Fold every line of the file; `progress(lines, bytes)` is called whenever
    /// `lines & mask == 0` (every 64k lines by default).
    #[pyo3(signature = (path, progress=None, mask=PROGRESS_MASK))]
    fn feed_file(&mut self, py: Python<'_>, path: &str, progress: Option<Py<PyAny>>, mask: u64) -> PyResult<()> {
        let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
        let (mut line, mut offset) = (Vec::with_capacity(4096), 0u64);
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                return Ok(());
            }
            offset += n as u64;
            self.line(py, &line)?;
            if self.lineno & SIGNAL_MASK == 0 {
                py.check_signals()?; // Ctrl-C stops a long fold (KeyboardInterrupt)
            }
            if self.lineno & mask == 0 {
                if let Some(show) = &progress {
                    show.call1(py, (self.lineno, offset))?;
                }
            }
        }
    }

    /// Fold lines given by the caller (stdin, benchmarks), numbered on from the last.
    fn feed_lines(&mut self, py: Python<'_>, lines: Vec<Vec<u8>>) -> PyResult<()> {
        for raw in &lines {
            self.line(py, raw)?;
        }
        Ok(())
    }

    /// (runs [(first line, run id, VIEW + evicted)], rejected [{line, reason, message}],
    ///  deletions [(run id, path, root)] (empty unless `with_deletions`), applied, duplicates);
    /// each VIEW as the JSON text json.dumps would write when `as_text`, else as a dict.
    #[pyo3(signature = (with_deletions, as_text=false))]
    fn result<'py>(&self, py: Python<'py>, with_deletions: bool, as_text: bool) -> PyResult<Bound<'py, PyAny>> {
        let mut evicted: FxHashMap<&str, Vec<&str>> = FxHashMap::default();
        for (run_id, path, _) in &self.fold.deletions {
            evicted.entry(run_id).or_default().push(path);
        }
        let runs = PyList::empty(py);
        for (run_id, run) in &self.fold.runs {
            let gone = evicted.get(&**run_id).map_or(&[][..], Vec::as_slice);
            let first = self.first_line.get(run_id).copied().unwrap_or(0);
            if as_text {
                runs.append((first, &**run_id, view::view_text(py, &self.support, run, gone)?))?;
            } else {
                runs.append((first, &**run_id, view::view_object(py, &self.support, run, gone)?))?;
            }
        }
        let rejected = PyList::empty(py);
        for (line, reason, message) in &self.rejected {
            let entry = PyDict::new(py);
            entry.set_item("line", line)?;
            entry.set_item("reason", reason)?;
            entry.set_item("message", message)?;
            rejected.append(entry)?;
        }
        let deletions = PyList::empty(py);
        for (run_id, path, root) in self.fold.deletions.iter().filter(|_| with_deletions) {
            deletions.append((&**run_id, &**path, &**root))?;
        }
        (runs, rejected, deletions, self.applied, self.duplicates).into_pyobject(py).map(Bound::into_any)
    }
}

impl NativeFold {
    fn line(&mut self, py: Python<'_>, raw: &[u8]) -> PyResult<()> {
        self.lineno += 1;
        let owner = self.shards.as_ref().map_or(0, |s| s.route(raw));
        let mine = self.shards.as_ref().map_or(0, |s| s.mine);
        if owner != mine && owner != AMBIGUOUS || raw.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) {
            return Ok(());
        }
        let fast = if self.fast && raw.len() <= self.max_bytes { decode::decode(raw) } else { None };
        let event = match fast {
            Some(event) => event,
            None => match self.support.decode(py, raw)? {
                Ok(event) => event,
                Err(rejection) => {
                    if owner == mine || mine == 0 {
                        self.rejected.push((self.lineno, rejection.reason, rejection.message));
                    }
                    return Ok(());
                }
            },
        };
        if owner == AMBIGUOUS {
            if let Some(shards) = &self.shards {
                if shards.of_run(event.subject.as_bytes()) != mine {
                    return Ok(());
                }
            }
        }
        let new_run: Option<Box<str>> =
            if self.fold.runs.contains_key(&*event.subject) { None } else { Some((*event.subject).into()) };
        match self.fold.apply(py, &self.support, event)? {
            Outcome::Rejected(r) => self.rejected.push((self.lineno, r.reason, r.message)),
            Outcome::Applied { duplicate } => {
                self.applied += 1;
                self.duplicates += u64::from(duplicate);
                if let Some(subject) = new_run.filter(|s| self.fold.runs.contains_key(s)) {
                    self.first_line.insert(subject, self.lineno);
                }
            }
        }
        Ok(())
    }
}

/// `json.dumps(msgspec.json.decode(text))` for metrics text the decoder accepts, else None
/// (exposed for tests/unit/test_native_json.py).
#[pyfunction]
fn dumps_metrics(text: &str) -> Option<String> {
    let mut out = String::new();
    pyjson::write_metrics(&mut out, text).map(|()| out)
}

/// Whether the native decoder accepts this CloudEvents `time` (exposed for tests: every
/// accepted one must pass `datetime.fromisoformat`).
#[pyfunction]
fn time_ok(s: &str) -> bool {
    rfc3339::time_ok(s)
}

/// `json.dumps(x)` for a finite float (exposed for tests).
#[pyfunction]
fn dumps_float(x: f64) -> String {
    let mut out = String::new();
    pyjson::write_float(&mut out, x);
    out
}

/// `json.dumps(s)` for a string (exposed for tests).
#[pyfunction]
fn dumps_str(s: &str) -> String {
    let mut out = String::new();
    pyjson::write_str(&mut out, s);
    out
}

#[pymodule]
fn ckptlog_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeFold>()?;
    m.add_function(wrap_pyfunction!(dumps_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(dumps_float, m)?)?;
    m.add_function(wrap_pyfunction!(time_ok, m)?)?;
    m.add_function(wrap_pyfunction!(dumps_str, m)?)?;
    m.add("Unsupported", m.py().get_type::<Unsupported>())?;
    Ok(())
}
