// The dense table of a model's parameters as every rank asks for it:
// options.table, seeded and initialised on the servers following the
// network's InitPlan (so no rank has to send initial values).
//
// Thread-safety: pure functions.
#ifndef SHARDPS_WORKER_TRAIN_MODEL_TABLE_H_
#define SHARDPS_WORKER_TRAIN_MODEL_TABLE_H_

#include "model/network.h"
#include "ps/client/client.h"
#include "worker/train/trainer.h"

namespace worker {

ps::TableOptions ModelTable(const TrainerOptions& options,
                            const model::Network& net);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_MODEL_TABLE_H_
