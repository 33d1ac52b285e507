//! The model: what an experiment asks for and what a run measured, as written to and read from
//! disk. It depends on nothing else in the lab.

pub mod calibration;
pub mod hosts;
pub mod inventory;
pub mod knee;
pub mod load;
pub mod machine;
pub mod micro;
pub mod results;
pub mod sequential;
pub mod spec;
pub mod text;
