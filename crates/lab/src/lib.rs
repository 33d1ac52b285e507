//! evlab-lab: experiments that reproduce the papers' figures and tables. (Being built.)
