//! The fold (processor/core/fold.py with emit=False), rule for rule: same order of checks,
//! same state, same evictions. Kept checkpoints live in `Kept` (kept.rs).

use indexmap::IndexMap;
use pyo3::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::rc::Rc;

use crate::kept::{Id, Kept, Record, Status};
use crate::window::Window;
use crate::score::{merge, score_raw, SortKey};
use crate::support::{Event, Kind, Metrics, Rejection, Support};

#[derive(Clone)]
pub struct Config {
    pub keep: Option<usize>,
    pub attr: Option<String>,
    pub order_max: bool,
    pub root: Option<Rc<str>>,
    pub prefix: Box<str>, // canonical root + '/', "\0" when there is none
}

pub struct Run {
    pub id: Rc<str>,
    cfg: Config,
    started: Option<Py<PyAny>>,
    pub kept: Kept,
    pub latest: Option<Id>,
    pending: BTreeSet<u64>, // report indices; the first is the validated watermark
    pub report_count: u64,
    pub generation: u64,
    pub index_in_generation: u64,
    seen: Window,
    outstanding: FxHashMap<Rc<str>, Rc<str>>, // key -> path to delete
}

impl Run {
    fn new(id: &str, cfg: Config, started: Option<Py<PyAny>>) -> Self {
        Run {
            id: id.into(), started, kept: Kept::new(cfg.keep.is_some()), latest: None,
            pending: BTreeSet::new(), report_count: 0, generation: 0, index_in_generation: 0,
            seen: Window::default(), outstanding: FxHashMap::default(), cfg,
        }
    }

    pub fn validated(&self) -> u64 {
        self.pending.first().copied().unwrap_or(self.report_count)
    }

    /// processor/core/paths.py canonical_below: strictly below the root, every segment
    /// non-empty and not starting with a dot.
    fn own_key(&self, path: &str) -> bool {
        match path.strip_prefix(&*self.cfg.prefix) {
            Some(rest) => !rest.is_empty() && rest.split('/').all(|s| !s.is_empty() && !s.starts_with('.')),
            None => false,
        }
    }
}

pub enum Outcome {
    Applied { duplicate: bool },
    Rejected(Rejection),
}

const APPLIED: Outcome = Outcome::Applied { duplicate: false };

pub type Deletion = (Rc<str>, Rc<str>, Rc<str>); // run id, path, root

pub struct Fold {
    pub runs: IndexMap<Box<str>, Run, FxBuildHasher>,
    defaults: Config,
    window: usize,
    pub deletions: Vec<Deletion>,
}

impl Fold {
    pub fn new(defaults: Config, window: usize) -> Self {
        Fold { runs: IndexMap::default(), defaults, window, deletions: Vec::new() }
    }

    pub fn apply(&mut self, py: Python<'_>, sup: &Support, event: Event<'_>) -> PyResult<Outcome> {
        let (id, subject) = (event.id, event.subject);
        if let Some(run) = self.runs.get(&*subject) {
            if run.seen.contains(&id) {
                return Ok(Outcome::Applied { duplicate: true });
            }
        }
        let outcome = match event.kind {
            Kind::Report { generation, path, metrics, pending } =>
                self.report(py, sup, &subject, generation, path, metrics, pending)?,
            Kind::Validation { path, status, metrics } => self.validation(py, sup, &subject, &path, &status, metrics)?,
            Kind::Deletion { paths } => self.deletion(py, sup, &subject, &paths)?,
            Kind::Restart => {
                let run = self.run(&subject);
                run.generation += 1;
                run.index_in_generation = 0;
                APPLIED
            }
            Kind::RunStarted { data, storage_path, keep, attr, order_max } =>
                self.run_started(py, sup, &subject, data, storage_path, Config { keep, attr, order_max, root: None,
                                                                               prefix: "".into() })?,
        };
        if let Outcome::Applied { .. } = outcome {
            if let Some(run) = self.runs.get_mut(&*subject) {
                remember(run, id, self.window);
            }
        }
        Ok(outcome)
    }

    fn run(&mut self, run_id: &str) -> &mut Run {
        if !self.runs.contains_key(run_id) {
            self.runs.insert(run_id.into(), Run::new(run_id, self.defaults.clone(), None));
        }
        self.runs.get_mut(run_id).expect("just inserted")
    }

    #[allow(clippy::too_many_arguments)]
    fn report(&mut self, py: Python<'_>, sup: &Support, run_id: &str, generation: Option<u64>,
              path: Option<Cow<'_, str>>, metrics: Metrics, pending: bool) -> PyResult<Outcome> {
        if let (Some(run), Some(g)) = (self.runs.get(run_id), generation) {
            if g < run.generation {
                return Ok(Outcome::Rejected(sup.stale_generation(py, run_id, g, run.generation)?));
            }
        }
        let Some(path) = path else {
            let run = self.run(run_id);
            run.report_count += 1;
            run.index_in_generation += 1;
            return Ok(APPLIED);
        };
        let fast = self.runs.get(run_id).is_some_and(|run| {
            run.own_key(&path) && run.kept.find(&path).is_none() && !run.outstanding.contains_key(&*path)
        });
        let key = if fast {
            None
        } else {
            match self.check_checkpoint(py, sup, run_id, &path)? {
                Ok(key) if key == *path => None,
                Ok(key) => Some(Rc::from(key)),
                Err(rejection) => return Ok(Outcome::Rejected(rejection)),
            }
        };
        let run = self.run(run_id);
        let index = run.report_count;
        run.report_count += 1;
        run.index_in_generation += 1;
        self.register(py, sup, run_id, (*path).into(), key, metrics, index, pending)
    }

    fn check_checkpoint(&self, py: Python<'_>, sup: &Support, run_id: &str, path: &str)
                        -> PyResult<Result<String, Rejection>> {
        let run = self.runs.get(run_id);
        let cfg = run.map_or(&self.defaults, |r| &r.cfg);
        let own = run.is_some_and(|r| r.own_key(path));
        let key = match sup.checkpoint_key(py, run_id, path, cfg.root.as_deref(), &cfg.prefix, own)? {
            Ok(key) => key,
            Err(rejection) => return Ok(Err(rejection)),
        };
        if let Some(run) = run {
            if run.kept.find(&key).is_some() || run.outstanding.contains_key(key.as_str()) {
                return Ok(Err(sup.duplicate_path(py, run_id, path)?));
            }
        }
        Ok(Ok(key))
    }

    #[allow(clippy::too_many_arguments)]
    fn register(&mut self, py: Python<'_>, sup: &Support, run_id: &str, path: Rc<str>, key: Option<Rc<str>>,
                metrics: Metrics, index: u64, pending: bool) -> PyResult<Outcome> {
        let run = self.runs.get_mut(run_id).expect("registered runs exist");
        let (has, value) = score(py, sup, &run.cfg, &metrics)?;
        let status = if pending { Status::Pending } else { Status::Committed };
        if pending {
            run.pending.insert(index);
        }
        let sort_key = SortKey { has, value, index };
        run.latest = Some(run.kept.insert(Record { path, key, metrics, status, sort_key }));
        retain(run, &mut self.deletions);
        Ok(APPLIED)
    }

    fn validation(&mut self, py: Python<'_>, sup: &Support, run_id: &str, path: &str, status: &str,
                  metrics: Option<Metrics>) -> PyResult<Outcome> {
        let Some(run) = self.runs.get_mut(run_id) else { return Ok(APPLIED) }; // a warning only
        let key = if run.own_key(path) { Some(path.to_owned()) } else { sup.normalize(py, path)? };
        let Some(id) = key.as_deref().and_then(|k| run.kept.find(k)) else { return Ok(APPLIED) };
        if !run.pending.remove(&run.kept.get(id).sort_key.index) {
            return Ok(APPLIED); // kept but not pending: a warning only
        }
        let status = match status {
            "VALIDATED" => Status::Validated,
            "VALIDATION_FAILED" => Status::Failed,
            _ => Status::Timeout,
        };
        let record = run.kept.get_mut(id);
        record.status = status;
        if status == Status::Validated {
            if let Some(m) = &metrics {
                record.metrics = match (&record.metrics, m) {
                    (Metrics::Raw(old), Metrics::Raw(new)) => match merge(old, new) {
                        Some(text) => Metrics::Raw(text.into()),
                        None => sup.merge(py, &record.metrics, m)?,
                    },
                    _ => sup.merge(py, &record.metrics, m)?,
                };
            }
            let (has, value) = score(py, sup, &run.cfg, &record.metrics)?;
            let index = record.sort_key.index;
            run.kept.rekey(id, SortKey { has, value, index });
        }
        retain(run, &mut self.deletions);
        Ok(APPLIED)
    }

    fn deletion(&mut self, py: Python<'_>, sup: &Support, run_id: &str, paths: &[Cow<'_, str>]) -> PyResult<Outcome> {
        let Some(run) = self.runs.get_mut(run_id) else { return Ok(APPLIED) };
        for path in paths {
            let key = if run.own_key(path) { Some(path.to_string()) } else { sup.normalize(py, path)? };
            if let Some(key) = key {
                run.outstanding.remove(key.as_str());
            }
        }
        Ok(APPLIED)
    }

    fn run_started(&mut self, py: Python<'_>, sup: &Support, run_id: &str, data: Py<PyAny>, storage_path: String,
                   mut cfg: Config) -> PyResult<Outcome> {
        if let Some(rejection) = sup.check_root(py, run_id, &storage_path)? {
            return Ok(Outcome::Rejected(rejection));
        }
        let run = self.runs.get(run_id);
        if let Some(started) = run.and_then(|r| r.started.as_ref()) {
            if started.bind(py).eq(data.bind(py))? {
                return Ok(APPLIED); // an identical repeat: a no-op
            }
        }
        if let Some(run) = run {
            if run.started.is_some() || run.latest.is_some() || !run.outstanding.is_empty() {
                return Ok(Outcome::Rejected(sup.conflict(py, run_id, run.started.is_some())?));
            }
        }
        cfg.prefix = sup.root_prefix(py, Some(&storage_path))?.into();
        cfg.root = Some(storage_path.into());
        let mut fresh = Run::new(run_id, cfg, Some(data));
        if let Some(old) = self.runs.get_mut(run_id) {
            fresh.report_count = old.report_count;
            fresh.generation = old.generation;
            fresh.index_in_generation = old.index_in_generation;
            std::mem::swap(&mut fresh.seen, &mut old.seen);
        }
        self.runs.insert(run_id.into(), fresh); // an existing run keeps its place
        Ok(APPLIED)
    }
}

fn remember(run: &mut Run, id: Cow<'_, str>, window: usize) {
    run.seen.push(&id, window);
}

fn score(py: Python<'_>, sup: &Support, cfg: &Config, metrics: &Metrics) -> PyResult<(bool, f64)> {
    let Some(attr) = cfg.attr.as_deref() else { return Ok((false, f64::NEG_INFINITY)) };
    if let Metrics::Raw(text) = metrics {
        if let Some(found) = score_raw(text, attr, cfg.order_max) {
            return Ok(found);
        }
    }
    sup.score(py, metrics, attr, cfg.order_max)
}

/// Evict the non-exempt records among the first `len - keep` (SPEC §3 "Retention").
fn retain(run: &mut Run, deletions: &mut Vec<Deletion>) {
    let Some(keep) = run.cfg.keep else { return };
    let size = run.kept.len();
    if size <= keep {
        return;
    }
    let root: Rc<str> = run.cfg.root.clone().unwrap_or_else(|| Rc::from(""));
    for id in run.kept.head(size - keep) {
        if Some(id) == run.latest || run.kept.get(id).status == Status::Pending {
            continue;
        }
        let record = run.kept.remove(id);
        deletions.push((run.id.clone(), record.path.clone(), root.clone()));
        run.outstanding.insert(record.key().clone(), record.path);
    }
}
