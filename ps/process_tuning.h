// Process-wide settings every shardps binary applies first thing in main().
//
// gRPC receives each message into buffers it mallocs and frees per read. With
// glibc's default, dynamically adjusted thresholds those megabyte-sized
// buffers are either mmap'd fresh or trimmed back to the kernel as soon as they
// are freed, so every read faults in new pages: ~13 us per 4 KiB page on
// these VMs, which capped a server at about 1 GB/s of pushes. Fixed
// thresholds make glibc keep freed memory in its arenas and hand the same
// warm pages back to the next read.
#ifndef SHARDPS_PS_PROCESS_TUNING_H_
#define SHARDPS_PS_PROCESS_TUNING_H_

namespace ps {

void TuneProcessForBulkTransfers();

}  // namespace ps

#endif  // SHARDPS_PS_PROCESS_TUNING_H_
