//! The document model every report is rendered from: report.md and report.html are two
//! renderings of one list of blocks, so they always say the same thing.

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
}
