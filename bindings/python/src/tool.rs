//! A Python callable as a host tool: called with the arguments' JSON text and a context, it
//! returns the content as text (the package's `_invoke` wraps the user's function).

use embed::{CallCtx, Failure, HostTool};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a call's body is told (`ctx` in Python, through the package's `CallContext`).
#[pyclass(module = "tooljournal._native", name = "NativeCallCtx", frozen)]
pub(crate) struct NativeCallCtx(CallCtx);

#[pymethods]
impl NativeCallCtx {
    #[getter]
    fn call_id(&self) -> &str {
        &self.0.call_id
    }
    #[getter]
    fn idempotency_key(&self) -> &str {
        &self.0.idempotency_key
    }
    #[getter]
    fn attempt(&self) -> u32 {
        self.0.attempt
    }
    #[getter]
    fn session_id(&self) -> &str {
        &self.0.session_id
    }
    /// Live: true once the call's time limit passed or the user stopped the step.
    #[getter]
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// A tool whose body is `invoke(arguments: str, ctx) -> str`.
pub(crate) struct PyTool {
    pub(crate) invoke: Py<PyAny>,
    /// Set when the body saw the user's Ctrl-C: the step re-raises `KeyboardInterrupt`.
    pub(crate) interrupted: Arc<AtomicBool>,
}

impl HostTool for PyTool {
    fn call(&self, arguments: &str, ctx: &CallCtx) -> Result<String, Failure> {
        Python::attach(|py| {
            let ctx = NativeCallCtx(ctx.clone());
            match self.invoke.call1(py, (arguments, ctx)) {
                Ok(content) => content.extract::<String>(py).map_err(|_| Failure::Failed {
                    message: "the tool's wrapper returned something other than text".to_owned(),
                    retryable: false,
                }),
                Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => {
                    self.interrupted.store(true, Ordering::SeqCst);
                    Err(Failure::Stopped)
                }
                Err(e) => {
                    let value = e.value(py);
                    let retryable = value
                        .getattr("retryable")
                        .and_then(|r| r.is_truthy())
                        .unwrap_or(false);
                    let text = value.str().map(|s| s.to_string()).unwrap_or_default();
                    let message = if text.is_empty() {
                        e.get_type(py)
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_else(|_| "exception".to_owned())
                    } else {
                        text
                    };
                    Err(Failure::Failed { message, retryable })
                }
            }
        })
    }
}
