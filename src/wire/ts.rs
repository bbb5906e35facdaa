//! Timestamps as the vault writes them into rows and signed payloads: UTC with exactly three
//! fractional digits, `2026-11-30T13:42:42.123Z`. Typed fields carry a `jiff::Timestamp` and
//! (de)serialize through `millis`, so the bytes under a signature or a hash are the same as
//! those the string form wrote, and comparisons are of instants, not of text.
use jiff::Timestamp;

/// The vault's form of a timestamp (always `Z`, always three fractional digits, truncated).
pub fn format_millis(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `ts` cut to whole milliseconds: what survives a round trip through `format_millis`.
pub fn to_millis(ts: Timestamp) -> Timestamp {
    Timestamp::from_millisecond(ts.as_millisecond()).unwrap_or(ts)
}

/// `#[serde(with = "crate::wire::ts::millis")]` for a `Timestamp` field.
pub mod millis {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_millis(*ts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_digits_and_z_both_ways() {
        let ts: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(format_millis(ts), "2026-01-02T03:04:05.000Z");
        let ts: Timestamp = "2026-11-30T13:42:42.1239Z".parse().unwrap();
        assert_eq!(format_millis(ts), "2026-11-30T13:42:42.123Z");
        assert_eq!(
            format_millis(to_millis(ts)),
            "2026-11-30T13:42:42.123Z",
            "to_millis keeps what the format shows"
        );
        #[derive(serde::Serialize, serde::Deserialize)]
        struct T {
            #[serde(with = "millis")]
            at: Timestamp,
        }
        let text = r#"{"at":"2026-11-30T13:42:42.120Z"}"#;
        let t: T = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), text);
    }
}
