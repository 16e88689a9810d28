# Benchmarks are collected only by `make bench` (pytest benchmarks --benchmark-only).
