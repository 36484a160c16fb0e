//! placeholder: being written
pub mod json_schema;
pub const BACKEND_NAME: &str = "regex-fsm";
