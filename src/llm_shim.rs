//! TEMPORARY until branch h2 (tooljournal-llm) is merged: the same API, no adapter.
#![allow(dead_code)]
pub struct ModelConfig {
    pub base_url: Option<String>,
    pub request_timeout_ms: u64,
}
impl ModelConfig {
    pub fn from_env(_spec: &str, _var: Option<&str>) -> Result<ModelConfig, String> {
        Err("TEMP: no adapters yet".into())
    }
}
pub fn connect(_c: ModelConfig) -> Result<Box<dyn runtime::model::Model>, String> {
    Err("TEMP: no adapters yet".into())
}
