// "format": "image_folder": a folder of class subfolders of JPEG and PNG
// files (core/data/image_folder.h has the reader and ImageFolderConfig).
// Its one model input, "input", is [height, width, 3]; the classes are the
// subfolders.
#ifndef LOCKSTEP_CORE_DATA_IMAGE_FOLDER_FORMAT_H_
#define LOCKSTEP_CORE_DATA_IMAGE_FOLDER_FORMAT_H_

#include "core/data/data_format.h"
#include "core/data/image_folder.h"

namespace lockstep {

// A DataSpec of this format (the common fields at their defaults).
DataSpec ImageFolderDataSpec(ImageFolderConfig config);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IMAGE_FOLDER_FORMAT_H_
