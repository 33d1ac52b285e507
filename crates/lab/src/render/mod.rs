//! Rendering: Markdown, HTML and SVG from the model and its analysis.

pub mod micro;
pub mod report;
pub mod svg;
