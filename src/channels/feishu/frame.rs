//! The long connection's binary frame: the platform's proto2 `pbbp2.Frame`, written out by
//! hand for prost (no protoc step).
//!
//! ```proto
//! message Header { required string key = 1; required string value = 2; }
//! message Frame {
//!   required uint64 SeqID = 1;  required uint64 LogID = 2;
//!   required int32 service = 3; required int32 method = 4;   // 0 control, 1 data
//!   repeated Header headers = 5;
//!   optional string payload_encoding = 6; optional string payload_type = 7;
//!   optional bytes payload = 8;           optional string LogIDNew = 9;
//! }
//! ```
//!
//! Required fields are always encoded, as proto2 demands (the official SDKs reject a frame
//! without them).

use prost::Message;

/// `method` of control frames (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `method` of data frames (events, card callbacks).
pub const METHOD_DATA: i32 = 1;

/// One frame header.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// The header name (`type`, `message_id`, `sum`, `seq`, `trace_id`, `biz_rt`).
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// One frame.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Frame {
    /// Sequence id.
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// Log id.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The service id (from the connection URL's `service_id`).
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// Headers.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// Payload encoding.
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// Payload type.
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// The payload (JSON for data frames and pongs).
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    /// Log id (string form).
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

impl Frame {
    /// A ping for `service`.
    pub fn ping(service: i32) -> Self {
        Frame {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![Header {
                key: "type".into(),
                value: "ping".into(),
            }],
            ..Frame::default()
        }
    }

    /// The value of header `key`, if present.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// Adds (or replaces) header `key`.
    pub fn set_header(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.headers.iter_mut().find(|h| h.key == key) {
            Some(h) => h.value = value,
            None => self.headers.push(Header {
                key: key.into(),
                value,
            }),
        }
    }

    /// The frame's wire bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Parses wire bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        Frame::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_zeroes_are_encoded_and_frames_round_trip() {
        let ping = Frame::ping(7);
        let bytes = ping.to_bytes();
        // SeqID = 0 and LogID = 0 are present on the wire: 08 00 10 00.
        assert_eq!(&bytes[..4], &[0x08, 0x00, 0x10, 0x00]);
        assert_eq!(Frame::from_bytes(&bytes).unwrap(), ping);
        assert_eq!(ping.header("type"), Some("ping"));
        assert!(Frame::from_bytes(&[0xff, 0xff]).is_err());
    }
}
