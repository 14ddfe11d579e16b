// "format": "text": a masked language model's data from plain text files
// (core/data/text_dataset.h has the reader, its masking and TextConfig).
// Its model inputs are token_ids, segment_ids, padding_mask and
// mask_positions; a sample has max_predictions labels.
#ifndef LOCKSTEP_CORE_DATA_TEXT_FORMAT_H_
#define LOCKSTEP_CORE_DATA_TEXT_FORMAT_H_

#include "core/data/data_format.h"
#include "core/data/text_dataset.h"

namespace lockstep {

// A DataSpec of this format (the common fields at their defaults).
DataSpec TextDataSpec(TextConfig config);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_TEXT_FORMAT_H_
