//! `vault demo`: the end-to-end flow on a throwaway vault (arrives with the approval and HTTP work).
use crate::Exit;

pub fn run() -> anyhow::Result<Exit> {
    anyhow::bail!(
        "the demo is coming: it needs the MCP server, approvals and the HTTP executor, which are not built yet. \
         Meanwhile try `vault init`, `vault add http`, `vault list`"
    )
}
