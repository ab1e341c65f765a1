//! The HIP call that returned an error, and what kind of call it is: only a kernel dispatch can be
//! the hostcall refusal (CLR refuses in the dispatch path, `rocvirtual.cpp`), so
//! `hipErrorIllegalState` returned by stream capture, a graph, a memory or an event call is
//! something else, and says so.
//!
//! Source: HIP `hip_runtime_api.h` (the API names), CLR `hip_*.cpp` (`AMD_LOG_LEVEL=3` prints
//! `hipXxx: Returned hipErrorYyy`), CLR `rocvirtual.cpp` (the refusal, at dispatch).

use serde::Serialize;

/// What kind of HIP call returned the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApiKind {
    /// A kernel launch or dispatch (`hipLaunchKernel`, `hipModuleLaunchKernel`,
    /// `hipExtLaunchKernel`, …): the one kind the refusal comes from.
    Dispatch,
    /// Stream capture (`hipStreamBeginCapture`, `hipStreamEndCapture`, …).
    Capture,
    /// A graph call (`hipGraphLaunch`, `hipGraphInstantiate`, …).
    Graph,
    /// Memory (`hipMalloc`, `hipMemcpy`, `hipFree`, `hipHostRegister`, IPC, peer access, …).
    Memory,
    /// An event call (`hipEventRecord`, `hipEventSynchronize`, `hipStreamWaitEvent`, …).
    Event,
    /// Anything else (synchronisation, device queries, `hipGetLastError`): says nothing either way.
    Other,
}

impl ApiKind {
    /// Words for the report.
    pub fn describe(self) -> &'static str {
        match self {
            ApiKind::Dispatch => "a kernel launch",
            ApiKind::Capture => "stream capture",
            ApiKind::Graph => "a graph call",
            ApiKind::Memory => "a memory call",
            ApiKind::Event => "an event call",
            ApiKind::Other => "another HIP call",
        }
    }
}

/// The kind of the HIP call `name` (`hipStreamBeginCapture` → [`ApiKind::Capture`]).
pub fn kind_of(name: &str) -> ApiKind {
    let has = |s: &str| name.contains(s);
    if has("Capture") {
        ApiKind::Capture
    } else if name.starts_with("hipGraph") || name.starts_with("hipUserObject") {
        ApiKind::Graph
    } else if has("Event") {
        ApiKind::Event
    } else if has("Launch") && !has("HostFunc") {
        ApiKind::Dispatch
    } else if name.starts_with("hipMalloc")
        || name.starts_with("hipFree")
        || name.starts_with("hipMem")
        || name.starts_with("hipHost")
        || name.starts_with("hipIpc")
        || name.starts_with("hipPointer")
        || name.starts_with("hipArray")
        || has("Peer")
    {
        ApiKind::Memory
    } else {
        ApiKind::Other
    }
}

/// The first HIP API name on `line` (`hipStreamBeginCapture`), not an error code
/// (`hipErrorIllegalState`) or `hipSuccess`, with its kind.
pub fn failing_api(line: &str) -> Option<(String, ApiKind)> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(i) = line[from..].find("hip").map(|i| i + from) {
        from = i + 3;
        if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
            continue;
        }
        if !b.get(i + 3).is_some_and(u8::is_ascii_uppercase) {
            continue;
        }
        let name: String = line[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        if name.starts_with("hipError") || name == "hipSuccess" {
            continue;
        }
        let k = kind_of(&name);
        return Some((name, k));
    }
    None
}

/// `hipErrorIllegalState` returned by a call that is not a dispatch: (the call, its kind), for
/// capture, graph, memory and event calls only.
pub fn illegal_state_elsewhere(line: &str) -> Option<(String, ApiKind)> {
    if !line.contains("hipErrorIllegalState") {
        return None;
    }
    failing_api(line).filter(|(_, k)| {
        matches!(
            k,
            ApiKind::Capture | ApiKind::Graph | ApiKind::Memory | ApiKind::Event
        )
    })
}

/// Whether `hipErrorIllegalState` on `line` was returned by a kernel launch: the call named is a
/// dispatch, or (no call named) the line says `Launch`.
pub fn is_launch_illegal_state(line: &str) -> bool {
    if !line.contains("hipErrorIllegalState") {
        return false;
    }
    match failing_api(line) {
        Some((_, ApiKind::Dispatch)) => true,
        Some((_, ApiKind::Other)) | None => {
            line.contains("Launch") && !line.contains("hipGraphLaunch")
        }
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_call_is_classified() {
        for (line, name, kind) in [
            (":3:hip_module.cpp :605 : 1 us: hipModuleLaunchKernel: Returned hipErrorIllegalState :", "hipModuleLaunchKernel", ApiKind::Dispatch),
            (":3:hip_platform.cpp :225 : hipLaunchKernel ( 0x1, 0x2 ) Returned hipErrorIllegalState", "hipLaunchKernel", ApiKind::Dispatch),
            ("hipExtLaunchKernel returned hipErrorIllegalState", "hipExtLaunchKernel", ApiKind::Dispatch),
            (":3:hip_graph.cpp :1360: hipStreamBeginCapture: Returned hipErrorIllegalState :", "hipStreamBeginCapture", ApiKind::Capture),
            ("hipGraphLaunch: Returned hipErrorIllegalState", "hipGraphLaunch", ApiKind::Graph),
            ("hipMemcpyAsync: Returned hipErrorIllegalState", "hipMemcpyAsync", ApiKind::Memory),
            ("hipMalloc returned hipErrorIllegalState", "hipMalloc", ApiKind::Memory),
            ("hipEventRecord: Returned hipErrorIllegalState", "hipEventRecord", ApiKind::Event),
            ("hipStreamWaitEvent: Returned hipErrorIllegalState", "hipStreamWaitEvent", ApiKind::Event),
            ("hipDeviceSynchronize: Returned hipErrorIllegalState", "hipDeviceSynchronize", ApiKind::Other),
        ] {
            assert_eq!(failing_api(line), Some((name.to_owned(), kind)), "{line}");
        }
        assert_eq!(failing_api("hipErrorIllegalState only"), None);
        assert_eq!(failing_api("chipset hipster"), None);
        assert!(is_launch_illegal_state(
            "ncclLaunchKernel failed: hipErrorIllegalState"
        ));
        assert!(!is_launch_illegal_state(
            "hipGraphLaunch: Returned hipErrorIllegalState"
        ));
        assert!(
            illegal_state_elsewhere("hipStreamBeginCapture: Returned hipErrorIllegalState")
                .is_some()
        );
        assert!(
            illegal_state_elsewhere("hipLaunchKernel: Returned hipErrorIllegalState").is_none()
        );
    }
}
