// The whole public API.
#pragma once

#include "ubfuse/builder.h"
#include "ubfuse/compile.h"
#include "ubfuse/dtype.h"
#include "ubfuse/error.h"
#include "ubfuse/graph.h"
#include "ubfuse/shape.h"
#include "ubfuse/tensor.h"
