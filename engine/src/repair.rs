//! (in progress)
use serde::{Deserialize, Serialize};
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {}
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchReport {}
