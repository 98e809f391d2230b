# gnuplot curves.gp, in this folder, draws curves_steps.png, curves_active_layer_tokens.png, curves_steps.svg, curves_active_layer_tokens.svg
if (!exists("plot_0")) plot_0 = 'curves_steps.png'
if (!exists("plot_1")) plot_1 = 'curves_active_layer_tokens.png'
if (!exists("plot_2")) plot_2 = 'curves_steps.svg'
if (!exists("plot_3")) plot_3 = 'curves_active_layer_tokens.svg'
set datafile separator ','
set key outside right noenhanced
set grid
set ylabel 'validation CE (nats/byte)'
set terminal pngcairo size 1200,650
set output plot_0
set xlabel 'steps'
set title 'mean over 8 seeds, band = min..max'
unset arrow
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
set arrow from 27776, graph 0 to 27776, graph 1 nohead dt 2 lc 'gray'
plot 'bands.csv' index 0 using 2:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'bands.csv' index 0 using 2:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint-go', 'bands.csv' index 1 using 2:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'bands.csv' index 1 using 2:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint-go', 'bands.csv' index 2 using 2:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'bands.csv' index 2 using 2:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow-go', 'bands.csv' index 3 using 2:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'bands.csv' index 3 using 2:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow-go'
set terminal pngcairo size 1200,650
set output plot_1
set xlabel 'active-layer tokens'
set title 'mean over 8 seeds, band = min..max'
unset arrow
plot 'bands.csv' index 0 using 3:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'bands.csv' index 0 using 3:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint-go', 'bands.csv' index 1 using 3:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'bands.csv' index 1 using 3:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint-go', 'bands.csv' index 2 using 3:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'bands.csv' index 2 using 3:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow-go', 'bands.csv' index 3 using 3:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'bands.csv' index 3 using 3:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow-go'
set terminal svg size 1200,650
set output plot_2
set xlabel 'steps'
set title 'mean over 8 seeds, band = min..max'
unset arrow
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
set arrow from 27776, graph 0 to 27776, graph 1 nohead dt 2 lc 'gray'
plot 'bands.csv' index 0 using 2:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'bands.csv' index 0 using 2:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint-go', 'bands.csv' index 1 using 2:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'bands.csv' index 1 using 2:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint-go', 'bands.csv' index 2 using 2:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'bands.csv' index 2 using 2:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow-go', 'bands.csv' index 3 using 2:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'bands.csv' index 3 using 2:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow-go'
set terminal svg size 1200,650
set output plot_3
set xlabel 'active-layer tokens'
set title 'mean over 8 seeds, band = min..max'
unset arrow
plot 'bands.csv' index 0 using 3:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'bands.csv' index 0 using 3:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint-go', 'bands.csv' index 1 using 3:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'bands.csv' index 1 using 3:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint-go', 'bands.csv' index 2 using 3:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'bands.csv' index 2 using 3:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow-go', 'bands.csv' index 3 using 3:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'bands.csv' index 3 using 3:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow-go'
unset output
