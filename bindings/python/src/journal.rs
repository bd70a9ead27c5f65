//! `NativeJournal`: one session's journal held by this process, and the module's reading
//! functions.

use crate::errors::to_py;
use crate::tool::PyTool;
use embed::{Answer, Call, CreateOptions, FsyncPolicy, Journal, RerunPolicy, ResumeOptions};
use embed::{HostTool, StepResult, Stopper, ToolDecl};
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

#[pyclass(module = "tooljournal._native", name = "NativeJournal", frozen)]
pub(crate) struct NativeJournal {
    journal: Mutex<Option<Journal>>,
    stopper: Stopper,
    /// The user's Ctrl-C reached this step (the watch, or a body): re-raised once it ended.
    interrupted: Arc<AtomicBool>,
}

fn fsync_policy(fsync: &str) -> PyResult<FsyncPolicy> {
    match fsync {
        "group" => Ok(FsyncPolicy::Group),
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        other => Err(PyValueError::new_err(format!(
            "fsync `{other}`: not one of group, always, never"
        ))),
    }
}

fn rerun_policy(rerun: Option<&str>) -> PyResult<Option<RerunPolicy>> {
    match rerun {
        None | Some("none") => Ok(None),
        Some("not-started") => Ok(Some(RerunPolicy::NotStarted)),
        Some("safe") => Ok(Some(RerunPolicy::Safe)),
        Some(other) => Err(PyValueError::new_err(format!(
            "rerun `{other}`: not one of not-started, safe, none"
        ))),
    }
}

/// A tool's declaration from the package: `(name, description, schema_json, read_only,
/// idempotent, concurrent, timeout_ms, invoke)`.
type PyDecl = (
    String,
    String,
    String,
    bool,
    bool,
    bool,
    Option<u64>,
    Py<PyAny>,
);

fn decl(d: PyDecl, interrupted: &Arc<AtomicBool>) -> PyResult<(ToolDecl, Arc<dyn HostTool>)> {
    let (name, description, schema, read_only, idempotent, concurrent, timeout_ms, invoke) = d;
    let schema = serde_json::from_str(&schema)
        .map_err(|e| PyValueError::new_err(format!("tool `{name}`: schema: {e}")))?;
    let decl = ToolDecl {
        name,
        description,
        schema,
        read_only,
        idempotent,
        concurrent,
        timeout_ms,
    };
    let body = PyTool {
        invoke,
        interrupted: interrupted.clone(),
    };
    Ok((decl, Arc::new(body)))
}

fn result_dict<'py>(py: Python<'py>, r: StepResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("call_id", r.call_id)?;
    d.set_item("ok", r.ok)?;
    d.set_item("content", r.content)?;
    d.set_item("code", r.code)?;
    Ok(d)
}

fn results_list<'py>(py: Python<'py>, results: Vec<StepResult>) -> PyResult<Bound<'py, PyList>> {
    let dicts = results
        .into_iter()
        .map(|r| result_dict(py, r))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, dicts)
}

/// The plain form of a batch: `[{"id", "name", "arguments"}]`, arguments as JSON text or as
/// a JSON-able value.
fn answer_of_calls(calls: &Bound<'_, PyAny>, text: String) -> PyResult<Answer> {
    let py = calls.py();
    let mut out = Vec::new();
    for (i, item) in calls.try_iter()?.enumerate() {
        let item = item?;
        let item = item.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!("calls[{i}]: a dict with id, name and arguments"))
        })?;
        let field = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> { item.get_item(key) };
        let id = match field("id")? {
            Some(v) if !v.is_none() => Some(
                v.extract::<String>()
                    .map_err(|_| PyTypeError::new_err(format!("calls[{i}].id: not a string")))?,
            ),
            _ => None,
        };
        let name = field("name")?
            .ok_or_else(|| PyValueError::new_err(format!("calls[{i}].name: missing")))?
            .extract::<String>()
            .map_err(|_| PyTypeError::new_err(format!("calls[{i}].name: not a string")))?;
        let arguments = match field("arguments")? {
            None => "{}".to_owned(),
            Some(v) => match v.cast::<PyString>() {
                Ok(s) => s.extract::<String>()?,
                Err(_) => py
                    .import("json")?
                    .call_method1("dumps", (v,))?
                    .extract::<String>()?,
            },
        };
        out.push(Call {
            id,
            name,
            arguments,
        });
    }
    Ok(Answer {
        text,
        calls: out,
        stop: None,
    })
}

impl NativeJournal {
    fn new(journal: Journal, interrupted: Arc<AtomicBool>) -> NativeJournal {
        NativeJournal {
            stopper: journal.stopper(),
            journal: Mutex::new(Some(journal)),
            interrupted,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Journal>> {
        // A panic inside a step poisons the lock; the journal itself stays consistent (the
        // runtime's state machine refuses what no longer fits), so go on with it.
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the journal with the interpreter released (other Python threads, and the
    /// bodies of tools that overlap, run meanwhile).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Journal) -> Result<T, embed::EmbedError> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self.lock();
            match guard.as_mut() {
                Some(journal) => f(journal),
                None => Err(embed::EmbedError::usage("the journal is closed")),
            }
        })
        .map_err(to_py)
    }
}

#[pymethods]
impl NativeJournal {
    #[staticmethod]
    #[pyo3(signature = (location, workspace, fsync, parallel_max, builtins))]
    fn create(
        py: Python<'_>,
        location: String,
        workspace: String,
        fsync: &str,
        parallel_max: usize,
        builtins: bool,
    ) -> PyResult<NativeJournal> {
        let mut options = CreateOptions::new(workspace);
        options.fsync = fsync_policy(fsync)?;
        options.parallel_max = parallel_max;
        options.builtins = builtins;
        let journal = py
            .detach(|| Journal::create(&location, options))
            .map_err(to_py)?;
        Ok(NativeJournal::new(journal, Arc::default()))
    }

    #[staticmethod]
    #[pyo3(signature = (location, tools, rerun, kill_orphans, steal, builtins))]
    fn resume<'py>(
        py: Python<'py>,
        location: String,
        tools: Vec<PyDecl>,
        rerun: Option<&str>,
        kill_orphans: bool,
        steal: bool,
        builtins: bool,
    ) -> PyResult<(NativeJournal, Bound<'py, PyList>)> {
        let interrupted = Arc::<AtomicBool>::default();
        let tools = tools
            .into_iter()
            .map(|d| decl(d, &interrupted))
            .collect::<PyResult<Vec<_>>>()?;
        let options = ResumeOptions {
            tools,
            rerun: rerun_policy(rerun)?,
            kill_orphans,
            steal,
            builtins,
        };
        let (journal, ran) = py
            .detach(|| Journal::resume(&location, options))
            .map_err(to_py)?;
        Ok((
            NativeJournal::new(journal, interrupted),
            results_list(py, ran)?,
        ))
    }

    /// Registers a tool (before the first turn), declared as `resume` takes them.
    fn tool(&self, py: Python<'_>, declared: PyDecl) -> PyResult<()> {
        let (decl, body) = decl(declared, &self.interrupted)?;
        self.with(py, |j| j.tool(decl, body))
    }

    fn turn(&self, py: Python<'_>, user_text: String) -> PyResult<u32> {
        self.with(py, |j| j.turn(&user_text))
    }

    /// Runs a batch: `calls` in the plain form, or `response` as a provider's JSON text.
    /// Returns `(results, stopped)`; raises `KeyboardInterrupt` after the journal recorded
    /// the user's Ctrl-C.
    #[pyo3(signature = (calls=None, response=None, text=None))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        calls: Option<&Bound<'py, PyAny>>,
        response: Option<String>,
        text: Option<String>,
    ) -> PyResult<(Bound<'py, PyList>, bool)> {
        let answer = match (calls, response) {
            (Some(calls), None) => answer_of_calls(calls, text.unwrap_or_default())?,
            (None, Some(response)) => {
                let value: serde_json::Value = serde_json::from_str(&response)
                    .map_err(|e| PyValueError::new_err(format!("response: {e}")))?;
                let mut answer = embed::read_response(&value).map_err(to_py)?;
                if let Some(text) = text {
                    answer.text = text;
                }
                answer
            }
            _ => return Err(PyTypeError::new_err("step takes calls or a response")),
        };
        self.interrupted.store(false, Ordering::SeqCst);
        let interrupted = self.interrupted.clone();
        let stepped = self.with(py, move |j| {
            // Ctrl-C sets a flag that only the interpreter's main thread reads: look at it
            // while the batch runs (outside the bodies, which see it themselves).
            let mut watch = || {
                Python::attach(|py| {
                    let hit = py.check_signals().is_err();
                    if hit {
                        interrupted.store(true, Ordering::SeqCst);
                    }
                    hit
                })
            };
            j.step(answer, &mut watch)
        })?;
        if self.interrupted.swap(false, Ordering::SeqCst) {
            return Err(PyKeyboardInterrupt::new_err(
                "stopped by the user: the step and its turn were journaled as cancelled",
            ));
        }
        Ok((results_list(py, stepped.results)?, stepped.stopped))
    }

    /// The session so far as a request body, as JSON text.
    fn history(&self, py: Python<'_>, format: String) -> PyResult<String> {
        self.with(py, |j| j.history(&format).map(|v| v.to_string()))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut guard = self.lock();
            match guard.as_mut() {
                Some(journal) => {
                    let closed = journal.close();
                    // The lock goes with the journal, whether or not the close was written.
                    *guard = None;
                    closed
                }
                None => Ok(()),
            }
        })
        .map_err(to_py)
    }

    /// Stops the step in progress (from any thread): nothing starts after it, running
    /// calls see `ctx.cancelled`.
    fn abort(&self) {
        self.stopper.stop();
    }

    fn session_id(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |j| j.session_id())
    }

    fn location(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |j| Ok(j.location().to_string()))
    }
}

#[pyfunction]
#[pyo3(signature = (location, balance=false))]
pub(crate) fn classify(py: Python<'_>, location: String, balance: bool) -> PyResult<String> {
    py.detach(|| embed::classify(&location, balance))
        .map(|v| v.to_string())
        .map_err(to_py)
}

#[pyfunction]
#[pyo3(signature = (location, format, balance=false))]
pub(crate) fn rebuild(
    py: Python<'_>,
    location: String,
    format: String,
    balance: bool,
) -> PyResult<String> {
    py.detach(|| embed::rebuild(&location, &format, balance))
        .map(|v| v.to_string())
        .map_err(to_py)
}

#[pyfunction]
#[pyo3(signature = (location, balance=false))]
pub(crate) fn audit(py: Python<'_>, location: String, balance: bool) -> PyResult<String> {
    py.detach(|| embed::audit(&location, balance))
        .map(|v| v.to_string())
        .map_err(to_py)
}

/// One call as `read_response` gives it: `(id, name, arguments)`.
type PyCall = (Option<String>, String, String);

/// A provider's response (JSON text) read as a batch: `(text, [(id, name, arguments)])`.
#[pyfunction]
pub(crate) fn read_response(response: &str) -> PyResult<(String, Vec<PyCall>)> {
    let value: serde_json::Value = serde_json::from_str(response)
        .map_err(|e| PyValueError::new_err(format!("response: {e}")))?;
    let answer = embed::read_response(&value).map_err(to_py)?;
    let calls = answer
        .calls
        .into_iter()
        .map(|c| (c.id, c.name, c.arguments))
        .collect();
    Ok((answer.text, calls))
}
