// Fixture of Layers.CheckerRejectsAnUpwardInclude: the upper layer, which may use the lower.
#pragma once
#include "low/low.h"
