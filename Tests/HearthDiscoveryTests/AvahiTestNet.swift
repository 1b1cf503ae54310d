import Testing

/// Every test that talks to the test network's avahi-daemon is nested in this suite (one
/// file per feature, through extensions): they share one daemon, and the restart test kills
/// it, so they run one after another.
@Suite("Avahi on the test network", .serialized, .enabled(if: TestNet.isEnabled, TestNet.skipReason))
struct AvahiTestNet {}
