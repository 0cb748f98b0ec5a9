/*
 * hooks.c - the tables of the calls that go up the layers (core/hooks.h),
 * zero until qs_init_slow has the debug, observe, API and front layers
 * fill them in, and the flags of the debug layer's that the layers below
 * it test (guarded sampling on, a cache with the V flag).
 */
#include "core/hooks.h"

struct qs_debug_hooks qs_debug_hooks;
struct qs_observe_hooks qs_observe_hooks;
struct qs_api_hooks qs_api_hooks;
struct qs_front_hooks qs_front_hooks;
int qs_guard_on;
bool qs_debug_tools;
