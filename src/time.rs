//! Timestamps as the vault writes them: UTC with milliseconds, `2026-11-30T13:42:42.123Z`.
use jiff::Timestamp;

/// Now, as the journal writes it.
pub(crate) fn now_utc() -> String {
    format_utc(Timestamp::now())
}

/// A timestamp in the journal's form (always `Z`, always three fractional digits).
pub(crate) fn format_utc(ts: Timestamp) -> String {
    crate::wire::ts::format_millis(ts)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_with_millis() {
        let ts: Timestamp = "2026-11-30T13:42:42.1234Z".parse().unwrap();
        assert_eq!(format_utc(ts), "2026-11-30T13:42:42.123Z");
        let ts: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(format_utc(ts), "2026-01-02T03:04:05.000Z");
    }
}
