//! The document model every report is rendered from: report.md and report.html are two
//! renderings of one list of blocks (`render::page`), so they always say the same thing.

pub(crate) enum Block {
    H(u8, String),
    P(String),
    List(Vec<String>),
    Table(Vec<String>, Vec<Vec<String>>),
    Figure {
        file: String,
        svg: String,
        alt: String,
    },
    Code(Vec<String>),
    /// What each rendering says in its own form: the findings chart and the controls beside it
    /// (HTML), their table and list (Markdown).
    Raw {
        html: String,
        md: String,
    },
    /// Raw material a reader opens when wanted (every search's steps, calibration's probes,
    /// each point's commands): collapsed under its summary in HTML, as it is in Markdown.
    Details(String, Vec<Block>),
    /// The table of contents: a link to every section (`##`) that follows.
    Toc,
}
