//! `evlab micro readahead --json`: files sent over a socket from a cold or a warm page cache,
//! by read and write, by mmap (plain, or advised SEQUENTIAL or WILLNEED) and by sendfile (the
//! run and its judging are in `evlab_micro::readahead`).

use serde::{Deserialize, Serialize};

use super::{Finding, Machine};

/// How the file's bytes reach the socket.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Way {
    /// read(2) into a buffer, write(2) to the socket.
    Read,
    /// mmap(2), then write(2) of the mapping (the pages fault in as the kernel copies them).
    Mmap,
    /// As `Mmap`, with madvise(MADV_SEQUENTIAL) first.
    MmapSequential,
    /// As `Mmap`, with madvise(MADV_WILLNEED) first.
    MmapWillneed,
    /// sendfile(2): the kernel reads the file and sends it.
    Sendfile,
}

impl Way {
    pub const ALL: [Way; 5] = [
        Way::Read,
        Way::Mmap,
        Way::MmapSequential,
        Way::MmapWillneed,
        Way::Sendfile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Way::Read => "read",
            Way::Mmap => "mmap",
            Way::MmapSequential => "mmap-sequential",
            Way::MmapWillneed => "mmap-willneed",
            Way::Sendfile => "sendfile",
        }
    }

    pub fn from_name(s: &str) -> Option<Way> {
        Way::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// Whether the file's pages were dropped from the page cache before the send.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Dropped (posix_fadvise DONTNEED, checked with mincore): the send reads the disk.
    Cold,
    /// Read once just before: every page in memory.
    Warm,
}

impl Cache {
    pub fn name(self) -> &'static str {
        match self {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
        }
    }
}

/// The outcome of one point.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not measured, for the reason given (a cache that could not be made cold).
    Skipped,
    Failed,
}

/// One way, cache state and size, in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub way: Way,
    pub cache: Cache,
    /// Bytes of the file.
    pub size: u64,
    pub round: usize,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The share of the file's pages in the page cache just before the send (mincore).
    pub resident_before: f64,
    /// From the first byte sent to the receiver's last byte, seconds.
    pub seconds: f64,
    /// The sending thread's CPU time (user and system), microseconds per MiB sent.
    pub cpu_us_per_mib: f64,
}

/// The report (`evlab micro readahead --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub machine: Machine,
    /// The directory the files were made in, and its file system (`stat -f`).
    pub dir: String,
    pub filesystem: String,
    pub repeat: usize,
    pub points: Vec<Point>,
    #[serde(default)]
    pub findings: Vec<Finding>,
}
