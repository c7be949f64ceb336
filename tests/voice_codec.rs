//! The voice-note codec end to end: synthetic speech-like PCM (22 050 Hz as espeak-ng writes,
//! 24 000 Hz as the providers' raw PCM) is encoded, then read back by the libopus decoder
//! through the `ogg` reader (`decode_ogg_opus`), and the container is also walked by hand here
//! (page headers, CRC, OpusHead, OpusTags, granule positions, each packet's TOC byte) so that it
//! is checked independently of the writer crate. Then the waveform Telegram draws, the WAV
//! reader (normal and streamed sizes), the length cap, and espeak-ng's real output when the
//! engine is installed (`PERSONAD_REQUIRE_ESPEAK`, set by CI, makes its absence a failure).

use personad::adapters::voice::{
    MAX_VOICE_SECS, VoiceError, WAVEFORM_BYTES, WAVEFORM_VALUES, decode_ogg_opus, encode_voice,
    read_wav, voice_from_ogg, waveform,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// `secs` of audio at `rate`: the first half a gliding, wobbling tone with a little noise
/// (speech-like in level), the second half silence.
fn synth(rate: u32, secs: f64) -> Vec<i16> {
    let n = (f64::from(rate) * secs).round() as usize;
    let mut seed = 0x1234_5678u32;
    (0..n)
        .map(|i| {
            if i >= n / 2 {
                return 0;
            }
            let t = i as f64 / f64::from(rate);
            let freq = 180.0 + 250.0 * t;
            let level = 0.6 + 0.4 * (2.0 * std::f64::consts::PI * 3.0 * t).sin();
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let noise = f64::from(seed >> 16) / 65_536.0 - 0.5;
            let tone = (2.0 * std::f64::consts::PI * freq * t).sin()
                + 0.3 * (2.0 * std::f64::consts::PI * 2.0 * freq * t).sin();
            (level * (9_000.0 * tone + 2_000.0 * noise)) as i16
        })
        .collect()
}

/// Ogg's CRC-32 (polynomial 0x04c11db7, not reflected, initial 0), written out here so the
/// writer crate's is not trusted.
fn ogg_crc(bytes: &[u8]) -> u32 {
    let mut crc = 0u32;
    for &b in bytes {
        crc ^= u32::from(b) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
        }
    }
    crc
}

struct Page {
    flags: u8,
    granule: u64,
    serial: u32,
    sequence: u32,
    /// Packets completed on this page (a packet continued from an earlier page is joined).
    packets: Vec<Vec<u8>>,
}

/// Walks the Ogg pages by hand, checking each page's magic, version and CRC.
fn pages(bytes: &[u8]) -> Vec<Page> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut partial: Vec<u8> = Vec::new();
    while at < bytes.len() {
        let h = &bytes[at..];
        assert_eq!(&h[0..4], b"OggS", "page magic at {at}");
        assert_eq!(h[4], 0, "stream structure version");
        let segments = usize::from(h[26]);
        let lacing = &h[27..27 + segments];
        let body_len: usize = lacing.iter().map(|&l| usize::from(l)).sum();
        let page_len = 27 + segments + body_len;
        let mut page = h[..page_len].to_vec();
        let stored = u32::from_le_bytes([page[22], page[23], page[24], page[25]]);
        page[22..26].fill(0);
        assert_eq!(ogg_crc(&page), stored, "CRC of the page at {at}");
        let mut packets = Vec::new();
        let mut body = &h[27 + segments..page_len];
        for &l in lacing {
            partial.extend_from_slice(&body[..usize::from(l)]);
            body = &body[usize::from(l)..];
            if l < 255 {
                packets.push(std::mem::take(&mut partial));
            }
        }
        out.push(Page {
            flags: h[5],
            granule: u64::from_le_bytes(h[6..14].try_into().unwrap_or_default()),
            serial: u32::from_le_bytes([h[14], h[15], h[16], h[17]]),
            sequence: u32::from_le_bytes([h[18], h[19], h[20], h[21]]),
            packets,
        });
        at += page_len;
    }
    assert!(partial.is_empty(), "a packet runs past the last page");
    out
}

/// The 100 values of a packed waveform, unpacked by hand (5 bits each, LSB first).
fn unpack(packed: &[u8]) -> Vec<u8> {
    (0..WAVEFORM_VALUES)
        .map(|i| {
            (0..5).fold(0u8, |v, bit| {
                let at = i * 5 + bit;
                v | ((packed[at / 8] >> (at % 8)) & 1) << bit
            })
        })
        .collect()
}

fn energy(samples: &[i16]) -> f64 {
    samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len().max(1) as f64
}

/// Checks the container by hand; returns the pre-skip.
fn check_container(ogg: &[u8], rate: u32, pcm_len: usize) -> u64 {
    let pages = pages(ogg);
    assert!(pages.len() >= 3, "head, tags and audio pages");
    assert!(pages.iter().all(|p| p.serial == pages[0].serial));
    assert!(
        pages
            .iter()
            .enumerate()
            .all(|(i, p)| p.sequence as usize == i)
    );
    // OpusHead: alone on the first page, which begins the stream.
    assert_eq!(pages[0].flags, 0x02, "first page: beginning of stream only");
    assert_eq!(pages[0].packets.len(), 1);
    let head = &pages[0].packets[0];
    assert_eq!(head.len(), 19);
    assert_eq!(&head[0..8], b"OpusHead");
    assert_eq!(head[8], 1, "version");
    assert_eq!(head[9], 1, "channels");
    let pre_skip = u64::from(u16::from_le_bytes([head[10], head[11]]));
    assert!(pre_skip > 0 && pre_skip < 960 * 2, "pre-skip {pre_skip}");
    assert_eq!(
        u32::from_le_bytes(head[12..16].try_into().unwrap_or_default()),
        rate
    );
    assert_eq!(&head[16..18], &[0, 0], "output gain");
    assert_eq!(head[18], 0, "mapping family");
    assert_eq!(pages[0].granule, 0);
    // OpusTags: alone on the second page.
    assert_eq!(pages[1].packets.len(), 1);
    let tags = &pages[1].packets[0];
    assert_eq!(&tags[0..8], b"OpusTags");
    let vendor_len = u32::from_le_bytes(tags[8..12].try_into().unwrap_or_default()) as usize;
    assert_eq!(
        tags.len(),
        12 + vendor_len + 4,
        "vendor and a comment count"
    );
    assert_eq!(pages[1].granule, 0);
    // Audio: mono 20 ms packets, granules rising, the last page ending the stream at
    // pre-skip + the samples at 48 kHz.
    let audio = &pages[2..];
    let mut last = 0;
    let mut packets = 0u64;
    for page in audio {
        for packet in &page.packets {
            let toc = packet[0];
            let config = toc >> 3;
            let twenty_ms = match config {
                0..=11 => config % 4 == 1,
                12..=15 => config % 2 == 1,
                _ => config % 4 == 3,
            };
            assert!(twenty_ms, "TOC config {config} is not a 20 ms frame");
            assert_eq!(toc & 0b100, 0, "mono");
            assert_eq!(toc & 0b11, 0, "one frame per packet");
            packets += 1;
        }
        assert!(page.granule > last, "granules rise");
        last = page.granule;
    }
    for page in &audio[..audio.len() - 1] {
        assert_eq!(page.flags & 0x04, 0, "end of stream only on the last page");
        assert_eq!(page.granule, 960 * packets_up_to(audio, page));
    }
    let end = audio
        .last()
        .map(|p| (p.flags, p.granule))
        .unwrap_or_default();
    assert_eq!(end.0 & 0x04, 0x04, "the last page ends the stream");
    let samples48 = (pcm_len as u64 * 48_000).div_ceil(u64::from(rate));
    assert_eq!(
        end.1,
        pre_skip + samples48,
        "the final granule trims the end"
    );
    assert!(packets * 960 >= end.1 && (packets - 1) * 960 < end.1);
    pre_skip
}

/// Packets on the audio pages up to and including `page`.
fn packets_up_to(audio: &[Page], page: &Page) -> u64 {
    audio
        .iter()
        .take_while(|p| p.sequence <= page.sequence)
        .map(|p| p.packets.len() as u64)
        .sum()
}

fn round_trip(rate: u32) -> TestResult {
    let pcm = synth(rate, 3.2);
    let voice = encode_voice(&pcm, rate)?;
    assert_eq!(voice.duration_ms, 3_200);
    assert_eq!(voice.duration_secs, 4);
    check_container(&voice.ogg, rate, pcm.len());

    let decoded = decode_ogg_opus(&voice.ogg)?;
    assert_eq!(decoded.channels, 1);
    assert_eq!(decoded.rate_hz, 48_000);
    let secs_in = pcm.len() as f64 / f64::from(rate);
    let secs_out = decoded.samples.len() as f64 / 48_000.0;
    assert!(
        (secs_out - secs_in).abs() / secs_in < 0.05,
        "decoded {secs_out} s of {secs_in} s"
    );
    // The loud half came through loud and the silent half quiet.
    let (loud, quiet) = decoded.samples.split_at(decoded.samples.len() / 2);
    let (e_in, e_loud, e_quiet) = (energy(&pcm[..pcm.len() / 2]), energy(loud), energy(quiet));
    assert!(
        e_loud > e_in * 0.5 && e_loud < e_in * 2.0,
        "{e_loud} vs {e_in}"
    );
    assert!(e_quiet < e_loud / 1_000.0, "{e_quiet} vs {e_loud}");
    // About 24 kbps over the loud half.
    let kbps = voice.ogg.len() as f64 * 8.0 / secs_in / 1000.0;
    assert!(kbps > 6.0 && kbps < 40.0, "{kbps} kbps");

    assert_eq!(voice.waveform.len(), WAVEFORM_BYTES);
    assert_eq!(WAVEFORM_BYTES, 63);
    let values = unpack(&voice.waveform);
    assert!(values.iter().all(|&v| v <= 31));
    assert!(values[..48].iter().all(|&v| v >= 10), "{values:?}");
    assert!(values[52..].iter().all(|&v| v <= 1), "{values:?}");
    assert_eq!(voice.waveform[62] >> 4, 0, "the last 4 bits are padding");
    Ok(())
}

#[test]
fn speech_at_22050_hz_round_trips_through_libopus() -> TestResult {
    round_trip(22_050)
}

#[test]
fn speech_at_24000_hz_round_trips_through_libopus() -> TestResult {
    round_trip(24_000)
}

/// A provider's own Ogg/Opus is re-encoded canonically: same length, our waveform.
#[test]
fn a_providers_ogg_is_re_encoded_with_its_duration() -> TestResult {
    let pcm = synth(16_000, 2.5);
    let first = encode_voice(&pcm, 16_000)?;
    let again = voice_from_ogg(&first.ogg)?;
    assert_eq!(again.duration_secs, 3);
    assert!(
        again.duration_ms.abs_diff(2_500) <= 2,
        "{}",
        again.duration_ms
    );
    check_container(&again.ogg, 48_000, 120_000);
    assert_eq!(unpack(&again.waveform)[90..], [0; 10]);
    Ok(())
}

#[test]
fn the_same_pcm_gives_the_same_bytes() -> TestResult {
    let pcm = synth(24_000, 1.0);
    assert_eq!(encode_voice(&pcm, 24_000)?, encode_voice(&pcm, 24_000)?);
    Ok(())
}

/// Exactly the cap is a voice note; one sample more is TooLong; nothing is Empty; odd rates
/// are refused by name.
#[test]
fn the_cap_empty_input_and_rates() -> TestResult {
    let rate = 48_000;
    let cap = vec![0i16; (MAX_VOICE_SECS * rate) as usize];
    let voice = encode_voice(&cap, rate)?;
    assert_eq!(voice.duration_secs, MAX_VOICE_SECS);
    assert_eq!(unpack(&voice.waveform), vec![0; WAVEFORM_VALUES]);
    let mut over = cap;
    over.push(0);
    let err = encode_voice(&over, rate).err();
    assert!(
        matches!(err, Some(VoiceError::TooLong { secs: 61 })),
        "{err:?}"
    );
    assert!(matches!(
        encode_voice(&vec![0; 70 * 8_000], 8_000),
        Err(VoiceError::TooLong { secs: 70 })
    ));
    assert!(matches!(encode_voice(&[], 24_000), Err(VoiceError::Empty)));
    let odd = encode_voice(&[1, 2, 3], 96_000).err();
    assert!(matches!(odd, Some(VoiceError::UnsupportedRate(96_000))));
    let msg = odd.map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("96000"), "{msg}");
    // An unusual rate inside the range works (the resampler rounds its phase).
    assert_eq!(encode_voice(&synth(22_051, 1.0), 22_051)?.duration_secs, 1);
    Ok(())
}

/// A provider's Ogg longer than the cap is refused with its real length (the packets of a
/// 40 s note written twice, by the `ogg` crate, as one 80 s stream).
#[test]
fn a_providers_long_ogg_is_too_long() -> TestResult {
    let voice = encode_voice(&synth(48_000, 40.0), 48_000)?;
    let pages = pages(&voice.ogg);
    let audio: Vec<&Vec<u8>> = pages[2..].iter().flat_map(|p| &p.packets).collect();
    let mut w = ogg::PacketWriter::new(Vec::new());
    let end_page = ogg::PacketWriteEndInfo::EndPage;
    w.write_packet(pages[0].packets[0].clone(), 7, end_page, 0)?;
    w.write_packet(pages[1].packets[0].clone(), 7, end_page, 0)?;
    let total = 2 * audio.len();
    for (k, packet) in audio.iter().chain(audio.iter()).enumerate() {
        let info = if k + 1 == total {
            ogg::PacketWriteEndInfo::EndStream
        } else {
            ogg::PacketWriteEndInfo::NormalPacket
        };
        w.write_packet((*packet).clone(), 7, info, (k as u64 + 1) * 960)?;
    }
    let err = voice_from_ogg(&w.into_inner()).err();
    assert!(
        matches!(err, Some(VoiceError::TooLong { secs: 81 })),
        "{err:?}"
    );
    Ok(())
}

/// Bytes that are not Ogg, and Ogg that is not Opus, say which.
#[test]
fn garbage_is_not_ogg() -> TestResult {
    let err = decode_ogg_opus(b"definitely not an ogg stream").err();
    assert!(matches!(err, Some(VoiceError::OggRead(_))), "{err:?}");
    let err = voice_from_ogg(&[]).err();
    assert!(matches!(err, Some(VoiceError::OggRead(_))), "{err:?}");
    let mut w = ogg::PacketWriter::new(Vec::new());
    w.write_packet(
        b"\x01vorbis".to_vec(),
        1,
        ogg::PacketWriteEndInfo::EndStream,
        0,
    )?;
    let msg = decode_ogg_opus(&w.into_inner())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("OpusHead"), "{msg}");
    Ok(())
}

/// A WAV as a writer with known sizes makes it.
fn wav(rate: u32, channels: u16, samples: &[i16], sizes: Option<u32>) -> Vec<u8> {
    let data_len = (samples.len() * 2) as u32;
    let mut w = Vec::new();
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&sizes.unwrap_or(36 + data_len).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&channels.to_le_bytes());
    w.extend_from_slice(&rate.to_le_bytes());
    w.extend_from_slice(&(rate * 2 * u32::from(channels)).to_le_bytes());
    w.extend_from_slice(&(2 * channels).to_le_bytes());
    w.extend_from_slice(&16u16.to_le_bytes());
    // A chunk to skip, of odd length (padded).
    w.extend_from_slice(b"LIST");
    w.extend_from_slice(&3u32.to_le_bytes());
    w.extend_from_slice(b"abc\0");
    w.extend_from_slice(b"data");
    w.extend_from_slice(&sizes.unwrap_or(data_len).to_le_bytes());
    for s in samples {
        w.extend_from_slice(&s.to_le_bytes());
    }
    w
}

#[test]
fn wav_with_normal_and_streamed_sizes() -> TestResult {
    let mono = [0i16, 1000, -1000, i16::MAX, i16::MIN];
    assert_eq!(
        read_wav(&wav(22_050, 1, &mono, None))?,
        (22_050, mono.to_vec())
    );
    assert_eq!(
        read_wav(&wav(22_050, 1, &mono, Some(u32::MAX)))?,
        (22_050, mono.to_vec())
    );
    assert_eq!(
        read_wav(&wav(22_050, 1, &mono, Some(0)))?,
        (22_050, mono.to_vec())
    );
    // Stereo is downmixed (the mean); a trailing half frame is dropped.
    let mut stereo = wav(24_000, 2, &[100, 300, -200, -400, i16::MAX, i16::MAX], None);
    assert_eq!(read_wav(&stereo)?, (24_000, vec![200, -300, i16::MAX]));
    stereo.extend_from_slice(&[1, 2]);
    assert_eq!(read_wav(&stereo)?.1.len(), 3);
    // What is not a usable WAV says why.
    let cases: [(&[u8], &str); 2] = [(b"RIFX....WAVE", "RIFF"), (b"RIFF\0\0\0\0WAVE", "data")];
    for (bytes, why) in cases {
        let msg = read_wav(bytes)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains(why), "{msg}");
    }
    let mut eight_bit = wav(8_000, 1, &mono, None);
    eight_bit[34] = 8;
    let msg = read_wav(&eight_bit)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("8-bit"), "{msg}");
    Ok(())
}

/// The waveform follows loudness and stays in range for short and empty input.
#[test]
fn waveform_follows_loudness() {
    assert_eq!(waveform(&[]), vec![0; WAVEFORM_BYTES]);
    assert_eq!(waveform(&[i16::MIN; 3]).len(), WAVEFORM_BYTES);
    let ramp: Vec<i16> = (0..10_000).map(|i| (i * 3) as i16).collect();
    let values = unpack(&waveform(&ramp));
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    assert_eq!(values[99], 31);
    assert!(values[0] <= 1);
}

/// espeak-ng's real `--stdout` WAV (sizes left at 0x7FFFF000 as it streams) becomes a voice
/// note of about the same length.
#[test]
fn espeak_ng_output_becomes_a_voice_note() -> TestResult {
    let out = match std::process::Command::new("espeak-ng")
        .args(["--stdout", "hello there"])
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let msg = "SKIPPED: espeak-ng not installed";
            assert!(
                std::env::var_os("PERSONAD_REQUIRE_ESPEAK").is_none(),
                "{msg}, and PERSONAD_REQUIRE_ESPEAK is set"
            );
            eprintln!("{msg}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    assert!(out.status.success(), "espeak-ng failed");
    let (rate, pcm) = read_wav(&out.stdout)?;
    assert_eq!(rate, 22_050);
    assert!(pcm.len() > rate as usize / 2, "{} samples", pcm.len());
    let voice = encode_voice(&pcm, rate)?;
    check_container(&voice.ogg, rate, pcm.len());
    let decoded = decode_ogg_opus(&voice.ogg)?;
    let secs_in = pcm.len() as f64 / f64::from(rate);
    let secs_out = decoded.samples.len() as f64 / 48_000.0;
    assert!((secs_out - secs_in).abs() / secs_in < 0.05);
    assert_eq!(voice.duration_secs, secs_in.ceil() as u32);
    assert!(unpack(&voice.waveform).iter().any(|&v| v >= 20));
    Ok(())
}
