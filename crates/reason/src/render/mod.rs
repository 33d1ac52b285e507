//! Rendering: Markdown, HTML and SVG from the model and its analysis.

pub(crate) mod block;
pub mod compare;
pub mod knee;
pub mod micro;
pub(crate) mod page;
pub mod plot;
pub mod report;
pub mod seeds;
pub mod svg;
pub mod table;
pub mod verdicts;
