#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -std=c++17 -arch=sm_90a tools/.probe/ce_probe.cu -lcublas -lcuda -o /tmp/ce_probe 2>&1 | tail -3
for args in "2 8192 1 1 0" "2 8192 8 1 0" "2 8192 8 1 1" "2 8192 8 2 0" "2 8192 16 4 1" "2 2048 8 2 0" "2 2048 16 2 1" "2 2048 16 4 1" "2 2048 32 4 1" "2 2048 1 1 0"; do timeout 60 /tmp/ce_probe $args; done
