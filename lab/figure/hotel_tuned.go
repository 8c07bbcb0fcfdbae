package figure

import "github.com/sluicehq/sluice/lab/tune"

// HotelTuned is the best point the search found for each peer in each
// scenario of graph-hotel (the hotel graph, virtual time; the command
// and the tables are in docs/experiments.md). Both drivers run the
// peers' rows with it (peer_params=tuned).
var HotelTuned = map[string]map[string]tune.Point{}
