// A machine file is untrusted input: each fault is an error naming the
// file and the key.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/none.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: machine file '{{.*}}none.json': cannot read it (No such file or directory); give a file `fsdp-run --calibrate` wrote, or one of cpu, h100
// RUN: echo '{"fsdp_machine_version": 1' > %t/cut.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/cut.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=CUT
// CUT: error: machine file '{{.*}}cut.json': not JSON:
// RUN: echo '{"fsdp_machine_version": 2}' > %t/version.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/version.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=VERSION
// VERSION: error: machine file '{{.*}}version.json': 'fsdp_machine_version' is not 1
// RUN: echo '{"fsdp_machine_version": 1, "machine": "m", "ranks": 2, "matmul_flops_per_s": 100, "matmul_half_flops_per_s": 1000, "conv_flops_per_s": 100, "memory_bytes_per_s": -5, "host_memory_bytes_per_s": 1000, "op_overhead_s": 0.001, "collective_bytes_per_s": 1000, "collective_latency_s": 0.01, "copy_bytes_per_s": 1000, "collective_overlap": 1}' > %t/negative.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/negative.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: machine file '{{.*}}.json': 'memory_bytes_per_s' (bytes an element-wise kernel reads and writes) is missing or not a number from 1 to 1e18
// RUN: sed 's/"memory_bytes_per_s": -5/"memory_bytes_per_s": 5/; s/"collective_overlap": 1/"collective_overlap": 2/' %t/negative.json > %t/overlap.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/overlap.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERLAP
// OVERLAP: error: machine file '{{.*}}overlap.json': 'collective_overlap' is missing or not a number from 0 to 1
// RUN: sed 's/"collective_overlap": 2/"collective_overlap": 1, "collective_skew": 1.5/' %t/overlap.json > %t/skew.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/skew.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=SKEW
// SKEW: error: machine file '{{.*}}skew.json': 'collective_skew' is not a number from 0 to 1
// RUN: sed 's/"collective_overlap": 2/"collective_overlap": 1, "collective_skew": "low"/' %t/overlap.json > %t/skewtext.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/skewtext.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=SKEWTEXT
// SKEWTEXT: error: machine file '{{.*}}skewtext.json': 'collective_skew' is not a number from 0 to 1
// RUN: sed 's/"collective_overlap": 2/"collective_overlap": 1, "cache_bytes": 0/' %t/overlap.json > %t/cache.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/cache.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=CACHE
// CACHE: error: machine file '{{.*}}cache.json': 'cache_bytes' is not a number from 1 to 1e15
// RUN: not fsdp-opt %s --fsdp-memory-report="cold-kernel-seconds=0.1,0.2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COLDALONE
// COLDALONE: error: cold-kernel-seconds gives 2 times, kernel-seconds 0: one of each per instruction
// RUN: sed 's/"collective_overlap": 2/"collective_overlap": 1, "turbo": 1/' %t/overlap.json > %t/unknown.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/unknown.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: machine file '{{.*}}unknown.json': unknown key 'turbo'
// RUN: sed 's/"ranks": 2/"ranks": 0/' %t/negative.json > %t/ranks.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/ranks.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: machine file '{{.*}}ranks.json': 'ranks' is missing or not an integer from 1 to 65536
// RUN: sed 's/"ranks": 2/"ranks": 4611686018427387904/' %t/negative.json > %t/many.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/many.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: error: machine file '{{.*}}many.json': 'ranks' is missing or not an integer from 1 to 65536
// Rates beyond any machine's: a predicted time would overflow to inf or
// underflow to 0 (and the memory report's JSON would say inf or nan).
// RUN: sed 's/"memory_bytes_per_s": -5/"memory_bytes_per_s": 1e308/' %t/negative.json > %t/huge.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/huge.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: sed 's/"memory_bytes_per_s": -5/"memory_bytes_per_s": 5e-324/' %t/negative.json > %t/tiny.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/tiny.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: sed 's/"memory_bytes_per_s": -5/"memory_bytes_per_s": 5/; s/"op_overhead_s": 0.001/"op_overhead_s": 1e-300/' %t/negative.json > %t/instant.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/instant.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=INSTANT
// INSTANT: error: machine file '{{.*}}instant.json': 'op_overhead_s' ({{.*}}) is missing or not a number from 1e-12 to 3600
// A key given twice: which one counts would be a guess.
// RUN: sed 's/"memory_bytes_per_s": -5/"memory_bytes_per_s": 5, "memory_bytes_per_s": 6/' %t/negative.json > %t/twice.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/twice.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: machine file '{{.*}}twice.json': key 'memory_bytes_per_s' is given twice
// Only a regular file of at most 1 MiB is read: a pipe would block, a
// device (/dev/zero) never end.
// RUN: rm -f %t/fifo.json && mkfifo %t/fifo.json
// RUN: not timeout 60 fsdp-opt %s --fsdp-memory-report=machine=%t/fifo.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=FIFO
// FIFO: error: machine file '{{.*}}fifo.json': cannot read it (not a regular file (a pipe)); give a file
// RUN: not timeout 60 fsdp-opt %s --fsdp-memory-report=machine=/dev/zero -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: machine file '/dev/zero': cannot read it (not a regular file (a character device)); give a file
// RUN: %python -c "import sys; open(sys.argv[1], 'w').write(' ' * (2 << 20) + '{}')" %t/big.json
// RUN: not fsdp-opt %s --fsdp-memory-report=machine=%t/big.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: error: machine file '{{.*}}big.json': cannot read it (2097154 bytes, more than the 1048576 such a file may hold); give a file

module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  func.func @train_step(%x: tensor<4xf32>) {
    %y = aten.call "aten::relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}
