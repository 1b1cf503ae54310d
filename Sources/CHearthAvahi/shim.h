#ifndef CHEARTH_AVAHI_SHIM_H
#define CHEARTH_AVAHI_SHIM_H
#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-client/lookup.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/address.h>
#include <avahi-common/alternative.h>
#include <avahi-common/timeval.h>
#include <avahi-common/watch.h>
#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

// Small wrappers for what Swift cannot import or call comfortably: struct
// function pointers of AvahiPoll, and the address family hidden in a union.

/// Arms a one-shot timer on the poll `ms` milliseconds from now. Must be called
/// on the poll thread or with the threaded-poll lock held.
static inline AvahiTimeout *hearth_avahi_timeout_new(const AvahiPoll *poll, unsigned ms,
                                                     AvahiTimeoutCallback callback, void *userdata) {
    struct timeval tv;
    avahi_elapse_time(&tv, ms, 0);
    return poll->timeout_new(poll, &tv, callback, userdata);
}

/// Cancels and frees a timer made by hearth_avahi_timeout_new.
static inline void hearth_avahi_timeout_free(const AvahiPoll *poll, AvahiTimeout *timeout) {
    poll->timeout_free(timeout);
}

/// 4 for IPv4, 6 for IPv6, 0 when unknown.
static inline int hearth_avahi_address_family(const AvahiAddress *address) {
    if (address == NULL) return 0;
    if (address->proto == AVAHI_PROTO_INET) return 4;
    if (address->proto == AVAHI_PROTO_INET6) return 6;
    return 0;
}

/// True for an IPv6 link-local address (fe80::/10), which needs a scope (the interface) to be usable.
static inline int hearth_avahi_address_is_link_local_v6(const AvahiAddress *address) {
    if (address == NULL || address->proto != AVAHI_PROTO_INET6) return 0;
    return address->data.ipv6.address[0] == 0xfe && (address->data.ipv6.address[1] & 0xc0) == 0x80;
}

static inline int hearth_avahi_address_str_max(void) { return AVAHI_ADDRESS_STR_MAX; }
static inline int hearth_if_namesize(void) { return IF_NAMESIZE; }

#endif
