// The shared library hides every symbol except those marked COLL_EXPORT.
#pragma once
#define COLL_EXPORT __attribute__((visibility("default")))
