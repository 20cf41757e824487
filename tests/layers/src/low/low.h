// Fixture of Layers.CheckerRejectsAnUpwardInclude: the lower layer reaching up.
#pragma once
#include "high/high.h"
