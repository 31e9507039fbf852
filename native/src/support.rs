//! The Python side of the engine (processor/native.py `Support`): the decoder for every line
//! the fast path refuses, and the rare rules whose messages and path arithmetic stay
//! written once, in Python.

use pyo3::prelude::*;
use std::borrow::Cow;

use crate::Unsupported;

pub struct Rejection {
    pub reason: String,
    pub message: String,
}

pub enum Metrics {
    Raw(Box<str>),
    Py(Py<PyAny>),
}

pub enum Kind<'a> {
    Report { generation: Option<u64>, path: Option<Cow<'a, str>>, metrics: Metrics, pending: bool },
    Validation { path: Cow<'a, str>, status: Cow<'a, str>, metrics: Option<Metrics> },
    Deletion { paths: Vec<Cow<'a, str>> },
    Restart,
    RunStarted { data: Py<PyAny>, storage_path: String, keep: Option<usize>, attr: Option<String>, order_max: bool },
}

pub struct Event<'a> {
    pub id: Cow<'a, str>,
    pub subject: Cow<'a, str>,
    pub kind: Kind<'a>,
}

pub struct Support {
    obj: Py<PyAny>,
}

fn unsupported(what: &str, err: PyErr) -> PyErr {
    Unsupported::new_err(format!("{what}: {err}"))
}

impl Support {
    pub fn new(obj: Py<PyAny>) -> Self {
        Support { obj }
    }

    fn call<'py>(&self, py: Python<'py>, name: &str, args: impl pyo3::call::PyCallArgs<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.obj.bind(py).call_method1(name, args)
    }

    fn rejection(value: &Bound<'_, PyAny>) -> PyResult<Rejection> {
        let (reason, message): (String, String) = value.extract()?;
        Ok(Rejection { reason, message })
    }

    /// The Python decoder: an event, or the rejection with its reason and message.
    pub fn decode(&self, py: Python<'_>, raw: &[u8]) -> PyResult<Result<Event<'static>, Rejection>> {
        let t = self.call(py, "decode", (pyo3::types::PyBytes::new(py, raw),))?;
        let tag: u8 = t.get_item(0)?.extract()?;
        if tag == 0 {
            return Ok(Err(Rejection { reason: t.get_item(1)?.extract()?, message: t.get_item(2)?.extract()? }));
        }
        let id: String = t.get_item(1)?.extract()?;
        let subject: String = t.get_item(2)?.extract()?;
        let item = |i: usize| t.get_item(i);
        let kind = match tag {
            1 => Kind::Report {
                generation: item(3)?.extract().map_err(|e| unsupported("generation", e))?,
                path: item(4)?.extract::<Option<String>>()?.map(Cow::Owned),
                metrics: Metrics::Py(item(5)?.unbind()),
                pending: item(6)?.extract()?,
            },
            2 => Kind::Validation {
                path: Cow::Owned(item(3)?.extract()?),
                status: Cow::Owned(item(4)?.extract()?),
                metrics: Some(Metrics::Py(item(5)?.unbind())),
            },
            3 => Kind::Deletion { paths: item(3)?.extract::<Vec<String>>()?.into_iter().map(Cow::Owned).collect() },
            4 => Kind::Restart,
            5 => Kind::RunStarted {
                data: item(3)?.unbind(),
                storage_path: item(4)?.extract()?,
                keep: item(5)?.extract().map_err(|e| unsupported("num_to_keep", e))?,
                attr: item(6)?.extract()?,
                order_max: item(7)?.extract()?,
            },
            _ => return Err(Unsupported::new_err(format!("unknown event tag {tag}"))),
        };
        Ok(Ok(Event { id: Cow::Owned(id), subject: Cow::Owned(subject), kind }))
    }

    pub fn stale_generation(&self, py: Python<'_>, run_id: &str, generation: u64, current: u64) -> PyResult<Rejection> {
        Self::rejection(&self.call(py, "stale_generation", (run_id, generation, current))?)
    }

    pub fn check_root(&self, py: Python<'_>, run_id: &str, storage_path: &str) -> PyResult<Option<Rejection>> {
        let r = self.call(py, "check_root", (run_id, storage_path))?;
        if r.is_none() { Ok(None) } else { Self::rejection(&r).map(Some) }
    }

    /// The checkpoint's key, or why it cannot be registered (unsafe, no root, outside the root).
    pub fn checkpoint_key(&self, py: Python<'_>, run_id: &str, path: &str, root: Option<&str>, prefix: &str,
                          own: bool) -> PyResult<Result<String, Rejection>> {
        let r = self.call(py, "checkpoint_key", (run_id, path, root, prefix, own))?;
        if let Ok(key) = r.extract::<String>() {
            return Ok(Ok(key));
        }
        Self::rejection(&r).map(Err)
    }

    pub fn duplicate_path(&self, py: Python<'_>, run_id: &str, path: &str) -> PyResult<Rejection> {
        Self::rejection(&self.call(py, "duplicate_path", (run_id, path))?)
    }

    pub fn conflict(&self, py: Python<'_>, run_id: &str, started: bool) -> PyResult<Rejection> {
        Self::rejection(&self.call(py, "conflict", (run_id, started))?)
    }

    /// The canonical key of a path, None when it is unsafe.
    pub fn normalize(&self, py: Python<'_>, path: &str) -> PyResult<Option<String>> {
        self.call(py, "normalize", (path,))?.extract()
    }

    pub fn root_prefix(&self, py: Python<'_>, root: Option<&str>) -> PyResult<String> {
        self.call(py, "root_prefix", (root,))?.extract()
    }

    pub fn metrics_object<'py>(&self, py: Python<'py>, metrics: &Metrics) -> PyResult<Bound<'py, PyAny>> {
        match metrics {
            Metrics::Raw(text) => self.call(py, "load_metrics", (&**text,)),
            Metrics::Py(obj) => Ok(obj.bind(py).clone()),
        }
    }

    /// (has, signed value) by the Python scorer; a score it keeps as an int too large to be
    /// exact as a float is refused (the Python fold compares those exactly).
    pub fn score(&self, py: Python<'_>, metrics: &Metrics, attr: &str, order_max: bool) -> PyResult<(bool, f64)> {
        let object = self.metrics_object(py, metrics)?;
        let (has, value, exact): (bool, f64, bool) = self.call(py, "score", (object, attr, order_max))?.extract()?;
        if !exact {
            return Err(Unsupported::new_err(format!("score of {attr:?} is an int beyond 2**53")));
        }
        Ok((has, value))
    }

    /// `json.dumps` of the metrics' Python value.
    pub fn dumps(&self, py: Python<'_>, metrics: &Metrics) -> PyResult<String> {
        let object = self.metrics_object(py, metrics)?;
        self.call(py, "dumps", (object,))?.extract()
    }

    /// `{**old, **new}` as Python builds it for a VALIDATED result.
    pub fn merge(&self, py: Python<'_>, old: &Metrics, new: &Metrics) -> PyResult<Metrics> {
        let (a, b) = (self.metrics_object(py, old)?, self.metrics_object(py, new)?);
        Ok(Metrics::Py(self.call(py, "merge_metrics", (a, b))?.unbind()))
    }
}
