//! A run's VIEW (processor/core/view.py) plus `evicted`: as Python objects, or directly as the
//! JSON text `json.dumps` would write for them (the CLI's document: no million-object detour).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::fmt::Write;

use crate::fold::Run;
use crate::pyjson::{write_metrics, write_str};
use crate::support::{Metrics, Support};

pub fn view_object<'py>(py: Python<'py>, sup: &Support, run: &Run, evicted: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let checkpoints = PyList::empty(py);
    let order = run.kept.sorted();
    for &id in &order {
        let record = run.kept.get(id);
        let c = PyDict::new(py);
        c.set_item("path", &*record.path)?;
        c.set_item("metrics", sup.metrics_object(py, &record.metrics)?)?;
        c.set_item("status", record.status.name())?;
        c.set_item("report_index", record.sort_key.index)?;
        checkpoints.append(c)?;
    }
    let path_of = |id: Option<&usize>| id.map(|&id| &*run.kept.get(id).path);
    let view = PyDict::new(py);
    view.set_item("checkpoints", checkpoints)?;
    view.set_item("latest", path_of(run.latest.as_ref()))?;
    view.set_item("best", path_of(order.last()))?;
    view.set_item("committed", run.report_count)?;
    view.set_item("validated", run.validated())?;
    view.set_item("generation", run.generation)?;
    view.set_item("index_in_generation", run.index_in_generation)?;
    view.set_item("evicted", evicted.to_vec())?;
    Ok(view)
}

fn write_path(out: &mut String, path: Option<&str>) {
    match path {
        Some(p) => write_str(out, p),
        None => out.push_str("null"),
    }
}

pub fn view_text(py: Python<'_>, sup: &Support, run: &Run, evicted: &[&str]) -> PyResult<String> {
    let mut out = String::with_capacity(256 + 128 * run.kept.len() + 48 * evicted.len());
    out.push_str("{\"checkpoints\": [");
    let order = run.kept.sorted();
    for (i, &id) in order.iter().enumerate() {
        let record = run.kept.get(id);
        out.push_str(if i > 0 { ", {\"path\": " } else { "{\"path\": " });
        write_str(&mut out, &record.path);
        out.push_str(", \"metrics\": ");
        let mark = out.len();
        let written = match &record.metrics {
            Metrics::Raw(text) => write_metrics(&mut out, text),
            Metrics::Py(_) => None,
        };
        if written.is_none() {
            out.truncate(mark); // a partial write, if any
            out.push_str(&sup.dumps(py, &record.metrics)?);
        }
        let _ = write!(out, ", \"status\": \"{}\", \"report_index\": {}}}", record.status.name(), record.sort_key.index);
    }
    out.push_str("], \"latest\": ");
    write_path(&mut out, run.latest.map(|id| &*run.kept.get(id).path));
    out.push_str(", \"best\": ");
    write_path(&mut out, order.last().map(|&id| &*run.kept.get(id).path));
    let _ = write!(out, ", \"committed\": {}, \"validated\": {}, \"generation\": {}, \"index_in_generation\": {}, \
                        \"evicted\": [", run.report_count, run.validated(), run.generation, run.index_in_generation);
    for (i, path) in evicted.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(&mut out, path);
    }
    out.push_str("]}");
    Ok(out)
}
