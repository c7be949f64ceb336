//! The Ogg/Opus stream both ways (RFC 7845): `encode` turns 48 kHz mono samples into Opus
//! packets (libopus: 20 ms frames, VOIP, 24 kbps) in Ogg pages (the `ogg` crate's writer, which
//! computes the CRC): an `OpusHead` page (version 1, one channel, the encoder's lookahead as
//! pre-skip, the input rate, mapping family 0), an `OpusTags` page, then the audio, one page a
//! second, with granule positions in 48 kHz samples counting the pre-skip, the last one
//! trimming the end, and the end-of-stream flag. `decode_ogg_opus` reads such a stream back
//! with the libopus decoder. Only `voice` (its parent) calls it.

use std::io::Cursor;

use ogg::{PacketReader, PacketWriteEndInfo, PacketWriter};
use opusic_c::{Application, Bitrate, Channels, Decoder, Encoder, ErrorCode, SampleRate, Signal};

use super::{DecodedVoice, VoiceError};

/// Opus's rate, and so the granule positions' unit.
const RATE: u32 = 48_000;
/// 20 ms at 48 kHz.
const FRAME: usize = 960;
/// The bitrate asked of the encoder (speech, variable bitrate).
const BITRATE: u32 = 24_000;
/// Audio packets per Ogg page: one second of 20 ms frames.
const PACKETS_PER_PAGE: usize = 50;
/// The logical stream's serial number: fixed, so the same PCM gives the same file.
const SERIAL: u32 = 0x5652_4e31;
/// The largest packet libopus's documentation recommends room for.
const MAX_PACKET: usize = 4000;
/// The longest packet Opus allows: 120 ms at 48 kHz, per channel.
const MAX_PACKET_SAMPLES: usize = 5760;
/// How much `decode_ogg_opus` decodes at most, in seconds (a guard against huge input).
const DECODE_CAP_SECS: u64 = 600;

fn opus(step: &'static str) -> impl Fn(ErrorCode) -> VoiceError {
    move |e| VoiceError::Opus(format!("{step}: {}", e.message()))
}

/// The 19-byte `OpusHead` of a mono stream.
fn opus_head(pre_skip: u16, input_rate: u32) -> Vec<u8> {
    let mut head = Vec::with_capacity(19);
    head.extend_from_slice(b"OpusHead");
    head.push(1); // version
    head.push(1); // channels
    head.extend_from_slice(&pre_skip.to_le_bytes());
    head.extend_from_slice(&input_rate.to_le_bytes());
    head.extend_from_slice(&0i16.to_le_bytes()); // output gain
    head.push(0); // mapping family 0: mono or stereo, no table
    head
}

/// `OpusTags` with the linked libopus's version as the vendor and no comments.
fn opus_tags() -> Vec<u8> {
    let vendor = opusic_c::version().as_bytes();
    let vendor = &vendor[..vendor.len().min(255)];
    let mut tags = Vec::with_capacity(16 + vendor.len());
    tags.extend_from_slice(b"OpusTags");
    tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    tags.extend_from_slice(vendor);
    tags.extend_from_slice(&0u32.to_le_bytes()); // no user comments
    tags
}

/// Encodes 48 kHz mono samples (nominally -1.0..=1.0) as an Ogg/Opus file; `input_rate` is
/// recorded in the header as the original rate.
pub(super) fn encode(pcm48: &[f32], input_rate: u32) -> Result<Vec<u8>, VoiceError> {
    let mut encoder = Encoder::new(Channels::Mono, SampleRate::Hz48000, Application::Voip)
        .map_err(opus("creating the encoder"))?;
    encoder
        .set_bitrate(Bitrate::Value(BITRATE))
        .map_err(opus("setting the bitrate"))?;
    encoder
        .set_signal(Signal::Voice)
        .map_err(opus("setting the signal type"))?;
    let lookahead = encoder
        .get_look_ahead()
        .map_err(opus("reading the lookahead"))?;
    let pre_skip = u16::try_from(lookahead)
        .map_err(|_| VoiceError::Opus(format!("lookahead {lookahead} does not fit OpusHead")))?;

    let mut writer = PacketWriter::new(Vec::new());
    writer
        .write_packet(
            opus_head(pre_skip, input_rate),
            SERIAL,
            PacketWriteEndInfo::EndPage,
            0,
        )
        .map_err(VoiceError::OggWrite)?;
    writer
        .write_packet(opus_tags(), SERIAL, PacketWriteEndInfo::EndPage, 0)
        .map_err(VoiceError::OggWrite)?;

    // The decoder's first `pre_skip` samples are dropped, so the input is padded with as
    // many zeros (and up to a whole frame) for its last samples to come out.
    let total = pcm48.len() + usize::from(pre_skip);
    let frames = total.div_ceil(FRAME);
    let mut frame = [0f32; FRAME];
    let mut packet = [0u8; MAX_PACKET];
    for k in 0..frames {
        let start = (k * FRAME).min(pcm48.len());
        let end = ((k + 1) * FRAME).min(pcm48.len());
        frame.fill(0.0);
        frame[..end - start].copy_from_slice(&pcm48[start..end]);
        let n = encoder
            .encode_float_to_slice(&frame, &mut packet)
            .map_err(opus("encoding a frame"))?;
        let granule = ((k + 1) * FRAME).min(total) as u64;
        let end_info = if k + 1 == frames {
            PacketWriteEndInfo::EndStream
        } else if (k + 1) % PACKETS_PER_PAGE == 0 {
            PacketWriteEndInfo::EndPage
        } else {
            PacketWriteEndInfo::NormalPacket
        };
        writer
            .write_packet(packet[..n].to_vec(), SERIAL, end_info, granule)
            .map_err(VoiceError::OggWrite)?;
    }
    Ok(writer.into_inner())
}

/// What decoding needs from an `OpusHead`.
struct Head {
    channels: u8,
    pre_skip: u64,
    gain_q8: i16,
}

fn parse_head(data: &[u8]) -> Result<Head, VoiceError> {
    if data.len() < 19 || !data.starts_with(b"OpusHead") {
        return Err(VoiceError::BadOgg(
            "the first packet is not an OpusHead".into(),
        ));
    }
    let version = data[8];
    if version >> 4 != 0 {
        return Err(VoiceError::BadOgg(format!(
            "OpusHead version {version} is not supported"
        )));
    }
    let channels = data[9];
    let family = data[18];
    if family != 0 {
        return Err(VoiceError::BadOgg(format!(
            "channel mapping family {family} is not supported (only 0)"
        )));
    }
    if channels != 1 && channels != 2 {
        return Err(VoiceError::BadOgg(format!(
            "{channels} channels with mapping family 0 (1 or 2 are allowed)"
        )));
    }
    Ok(Head {
        channels,
        pre_skip: u64::from(u16::from_le_bytes([data[10], data[11]])),
        gain_q8: i16::from_le_bytes([data[16], data[17]]),
    })
}

/// Decodes an Ogg/Opus file with the libopus decoder, at 48 kHz, its channels kept
/// interleaved, without the pre-skip, trimmed to the last granule position. Streams longer
/// than ten minutes are refused ([`VoiceError::TooLong`]).
pub fn decode_ogg_opus(bytes: &[u8]) -> Result<DecodedVoice, VoiceError> {
    decode_capped(bytes, DECODE_CAP_SECS)
}

/// [`decode_ogg_opus`] that stops decoding past `cap_secs` (it still reads the pages to the
/// end, to report the real length in [`VoiceError::TooLong`]).
pub(super) fn decode_capped(bytes: &[u8], cap_secs: u64) -> Result<DecodedVoice, VoiceError> {
    let mut reader = PacketReader::new(Cursor::new(bytes));
    let first = reader
        .read_packet()
        .map_err(VoiceError::OggRead)?
        .ok_or_else(|| VoiceError::BadOgg("no Ogg packet at all".into()))?;
    let head = parse_head(&first.data)?;
    let serial = first.stream_serial();
    let tags = next_packet(&mut reader, serial)?
        .ok_or_else(|| VoiceError::BadOgg("no OpusTags packet".into()))?;
    if !tags.data.starts_with(b"OpusTags") {
        return Err(VoiceError::BadOgg(
            "the second packet is not OpusTags".into(),
        ));
    }

    let channels = if head.channels == 2 {
        Channels::Stereo
    } else {
        Channels::Mono
    };
    let ch = usize::from(head.channels);
    let mut decoder =
        Decoder::new(channels, SampleRate::Hz48000).map_err(opus("creating the decoder"))?;
    if head.gain_q8 != 0 {
        decoder
            .set_gain(i32::from(head.gain_q8))
            .map_err(opus("setting the output gain"))?;
    }
    let cap = (cap_secs * u64::from(RATE) + head.pre_skip) as usize * ch;
    // libopus's int API writes i16 samples; opusic-c types the buffer as u16.
    let mut buf = vec![0u16; MAX_PACKET_SAMPLES * ch];
    let mut samples: Vec<i16> = Vec::new();
    let mut last_granule = None;
    let mut over_cap = false;
    while let Some(packet) = next_packet(&mut reader, serial)? {
        if !over_cap {
            let n = decoder
                .decode_to_slice(&packet.data, &mut buf, false)
                .map_err(opus("decoding a packet"))?;
            samples.extend(buf[..n * ch].iter().map(|&s| s as i16));
            over_cap = samples.len() > cap;
        }
        // u64::MAX is "no packet ends on this page".
        if packet.last_in_page() && packet.absgp_page() != u64::MAX {
            last_granule = Some(packet.absgp_page());
        }
        if packet.last_in_stream() {
            break;
        }
    }
    if over_cap {
        let granule = last_granule.unwrap_or(0).saturating_sub(head.pre_skip);
        let secs = granule.div_ceil(u64::from(RATE)).max(cap_secs + 1);
        return Err(VoiceError::TooLong {
            secs: u32::try_from(secs).unwrap_or(u32::MAX),
        });
    }
    let pre_skip = (head.pre_skip as usize * ch).min(samples.len());
    samples.drain(..pre_skip);
    if let Some(granule) = last_granule {
        let keep = granule.saturating_sub(head.pre_skip) as usize * ch;
        samples.truncate(keep);
    }
    Ok(DecodedVoice {
        channels: head.channels,
        rate_hz: RATE,
        samples,
    })
}

/// The next packet of the logical stream `serial` (other multiplexed streams are skipped).
fn next_packet(
    reader: &mut PacketReader<Cursor<&[u8]>>,
    serial: u32,
) -> Result<Option<ogg::Packet>, VoiceError> {
    while let Some(packet) = reader.read_packet().map_err(VoiceError::OggRead)? {
        if packet.stream_serial() == serial {
            return Ok(Some(packet));
        }
    }
    Ok(None)
}
