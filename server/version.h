// server/version.h - the server's version and the Redis version whose behaviour it follows
// (reported as redis_version in INFO and HELLO, which clients use for feature checks).
#pragma once

#define STRATAKV_VERSION "0.1.0"
#define STRATAKV_REDIS_VERSION "7.0.15"
