//! What a session journals about its model: which model and prompt (`session/model`), the
//! tools as the model is shown them (`tool/schema`, once per distinct schema), and each
//! request's attempts (`llm/request`, `llm/attempt-failed`). The agent loop
//! (`crate::agent`) calls these; a transcript needs none of them.

use super::Session;
use crate::event::{
    ContextCompacted, ContextSummaryRequested, Event, LlmAttemptFailed, LlmRequest, SessionModel,
    ToolSchema, VisibleTool,
};
use crate::model::ToolSpec;
use crate::RuntimeError;

impl Session {
    /// Journals `model` (`session/model`) unless it is what the journal last recorded (its
    /// note aside). Returns whether it wrote.
    pub fn record_model(&mut self, model: SessionModel) -> Result<bool, RuntimeError> {
        let same = self.recorded_model.as_ref().is_some_and(|last| {
            last.provider == model.provider
                && last.model == model.model
                && last.system == model.system
                && last.settings == model.settings
                && last.base_url == model.base_url
        });
        if same {
            return Ok(false);
        }
        self.log.append(&Event::SessionModel(model.clone()))?;
        self.recorded_model = Some(model);
        Ok(true)
    }

    /// The model the journal last recorded (`session/model`), if any.
    pub fn recorded_model(&self) -> Option<&SessionModel> {
        self.recorded_model.as_ref()
    }

    /// `tool/schema` for each of `tools` the journal does not describe as it is: a (name,
    /// schema hash) never recorded, or recorded with another description. The hash covers the
    /// schemas only, so two tools with the same schemas get a record each.
    pub(super) fn record_schemas(&mut self, tools: &[VisibleTool]) -> Result<(), RuntimeError> {
        for tool in tools {
            let Some(entry) = self.registry.lookup(&tool.name) else {
                continue;
            };
            let key = (tool.name.clone(), tool.schema_hash.clone());
            let description = entry.tool.description();
            if self.recorded_schemas.get(&key).map(String::as_str) == Some(description) {
                continue;
            }
            self.log.append(&Event::ToolSchema(ToolSchema {
                schema_hash: tool.schema_hash.clone(),
                name: tool.name.clone(),
                description: description.to_owned(),
                input_schema: canonical(&entry.tool.input_schema()),
            }))?;
            self.recorded_schemas.insert(key, description.to_owned());
        }
        Ok(())
    }

    /// The tools of the open step as the model is shown them, in `step/tools` order.
    pub fn step_tool_specs(&self) -> Vec<ToolSpec> {
        let Some((_, Event::StepTools { tools, .. })) = &self.step_tools else {
            return Vec::new();
        };
        tools
            .iter()
            .filter_map(|t| {
                let entry = self.registry.lookup(&t.name)?;
                Some(ToolSpec {
                    name: t.name.clone(),
                    description: entry.tool.description().to_owned(),
                    input_schema: entry.tool.input_schema(),
                })
            })
            .collect()
    }

    /// The open step's number (0 before the first of the turn).
    pub fn step(&self) -> u32 {
        self.step
    }

    /// Journals an attempt's request (`llm/request`) and makes everything before it durable:
    /// the results the request carries are on disk before the model can see them, so a crash
    /// after it saw them never turns them into `TOOL_OUTCOME_UNKNOWN`.
    pub async fn record_request(&mut self, request: LlmRequest) -> Result<(), RuntimeError> {
        self.check_open_step("llm/request")?;
        let seq = self.log.append(&Event::LlmRequest(request))?;
        self.log.sync_through(seq).await
    }

    /// Journals a failed attempt (`llm/attempt-failed`).
    pub fn record_attempt_failed(&mut self, failed: LlmAttemptFailed) -> Result<(), RuntimeError> {
        self.check_open_step("llm/attempt-failed")?;
        self.log.append(&Event::LlmAttemptFailed(failed))?;
        Ok(())
    }

    /// Journals that the model is about to be asked for a summary (`context/summary-requested`)
    /// and waits until it is durable: a crash during the request finds it, and finds no
    /// reduction.
    pub async fn record_summary_request(
        &mut self,
        requested: ContextSummaryRequested,
    ) -> Result<(), RuntimeError> {
        self.check_open_step("context/summary-requested")?;
        let seq = self
            .log
            .append(&Event::ContextSummaryRequested(requested))?;
        self.log.sync_through(seq).await
    }

    /// Journals the provider's token count of the step's refused request
    /// (`context/calibrated`); made durable by the sync of what follows it in the step.
    pub fn record_calibration(
        &mut self,
        calibrated: crate::event::ContextCalibrated,
    ) -> Result<(), RuntimeError> {
        self.check_open_step("context/calibrated")?;
        self.log.append(&Event::ContextCalibrated(calibrated))?;
        Ok(())
    }

    /// Journals a reduction of the context (`context/compacted`); the next `llm/request`'s sync
    /// makes it durable before the reduced request leaves.
    pub fn record_compaction(&mut self, compacted: ContextCompacted) -> Result<(), RuntimeError> {
        self.check_open_step("context/compacted")?;
        self.log.append(&Event::ContextCompacted(compacted))?;
        Ok(())
    }

    fn check_open_step(&self, what: &str) -> Result<(), RuntimeError> {
        self.phase.check_unanswered(what)
    }
}

/// `value` as canonical JSON text (serde_json's `Value` keeps object keys sorted).
fn canonical(value: &serde_json::Value) -> String {
    value.to_string()
}
